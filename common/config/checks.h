// Checks across files, run once every file has been read: routes (target,
// source, format, no loops), listening addresses, and named resources.
#pragma once

#include "common/config/diagnostic.h"
#include "common/config/model.h"

namespace ductus::config {

// A route's target exists, has `source: internal`, reads the format the
// destination outputs; no route loops.
void checkRoutes(const Project& project, Diagnostics& out);

// No two listeners (MLLP, HTTP sources, the API) on one address, except
// HTTP interfaces sharing a port with distinct paths.
void checkEndpoints(const Project& project, Diagnostics& out);

// http destinations' api: and dedicated_pools name resources that exist.
void checkResources(const Project& project, Diagnostics& out);

// Every certificates: entry a name is used for exists and is the right
// kind: a listener's tls.certificate and an outbound certificate: a pair; a
// clients.ca or an outbound ca: an entry with a CA (or a pair, whose chain
// is then the CA). Each mistake at the use, with the entries that would fit.
void checkCertificates(const Project& project, Diagnostics& out);

// sftp: private_key files exist and can be read; a known_hosts file has a
// key for the server's host (or [host]:port).
void checkSftpFiles(const Project& project, Diagnostics& out);

// What starts but should not go unnoticed: the API on an address other than
// loopback without tls: (its session cookie is Secure; passwords would cross
// in clear); an sftp: private_key file its group or others can read.
// `validate` prints these; the engine logs the same at start.
Diagnostics projectWarnings(const Project& project);

}  // namespace ductus::config
