// What keeps a project whose files are valid from starting, found without a
// database: a certificate that does not load, and interface code that does
// not load in a worker or does not export a function interface.yaml names.
// `ductus validate` reports these with the config's own errors, so "valid"
// means "will start"; `ductus run` refuses a certificate before connecting
// anywhere (the engine itself refuses code that doesn't load).
#pragma once

#include <filesystem>
#include <string>

#include "common/config/diagnostic.h"
#include "common/config/model.h"
#include "common/tls/certificate.h"

namespace ductus::supervisor {

// Loads every certificates: entry as the engine does before the database
// (tls::loadSource): a file that can't be read, a key that doesn't match
// its certificate, an expired certificate (or CA) are each a diagnostic at
// the entry's line in resources.yaml, naming it. `validate` reports them
// with the config's errors; `run` refuses to start on the same (the
// engine's start, tls::Certificates::load).
config::Diagnostics checkCertificateFiles(const config::Project& project,
                                          tls::Clock::time_point now = tls::Clock::now());

// Loads every interface's code in one confined worker, as the engine does,
// then each function interface.yaml names. A load error is reported at the
// module's file:line:column; a missing export at the yaml line that names
// it. Blocking: it runs a worker (`binary worker ...`) on a loop of its own.
config::Diagnostics checkInterfaceCode(const config::Project& project,
                                       const std::string& binary = "/proc/self/exe");

// A worker's load error ("interfaces/x/transform.js:3:9: SyntaxError: ...")
// as a diagnostic in the project folder.
config::Diagnostic loadErrorDiagnostic(const std::filesystem::path& projectRoot,
                                       const std::string& error);

}  // namespace ductus::supervisor
