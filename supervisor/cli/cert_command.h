// `ductus cert self-signed | request | show`: the certificates a project's
// certificates: entries name, made and checked without the engine.
//  - self-signed: a new key (ECDSA P-256, or RSA 2048) and a certificate
//    for server and client authentication, for a test or a closed network;
//    prints the resources.yaml entry to paste.
//  - request: a new key and a certificate signing request (PEM) with the
//    same names and uses, for the hospital's CA to sign.
//  - show: a certificate file or a project's entry, judged as the engine
//    would: names, validity (a warning under 30 days left, exit 1 once
//    expired), whether the key belongs to it, whether the chain is in order.
// Keys are written 0600 and never over an existing file.
#pragma once

namespace CLI {
class App;
}

namespace ductus::supervisor {

// See common/command_line.h for how commands are added and run.
void addCertCommand(CLI::App& ductus, int& exitCode);

}  // namespace ductus::supervisor
