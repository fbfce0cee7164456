// ductusctl's actions: messages, show, resend, dismiss, pause, resume,
// restart, drain, undrain. Each is one of the REST API's operations, asked
// through the control socket's `api` request (supervisor/control_socket.h):
// the engine runs the API's own handler with the caller local:<you>, so the
// checks, the changes and the audit rows are the API's.
#pragma once

#include <CLI/CLI.hpp>

namespace ductus::ctl {

void addCtlActionCommands(CLI::App& program, int& exitCode);

}  // namespace ductus::ctl
