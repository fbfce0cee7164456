// ductusctl's actions: messages, show, resend, dismiss, pause, resume,
// restart, drain, undrain. Each is one of the REST API's operations, asked
// through the control socket's `api` request (supervisor/control_socket.h):
// the engine runs the API's own handler with the caller local:<you>, so the
// checks, the changes and the audit rows are the API's.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "ctl/client.h"

namespace ductus::ctl {

void addCtlActionCommands(CLI::App& program, int& exitCode);

// What every action (here and ctl/monitoring.h) is made of:
// A query value or path segment: unreserved characters as they are, the rest %XX.
std::string encoded(const std::string& v);
// One API operation through the control socket. The answer's body, or
// nullopt after saying on stderr why not (as `ductusctl COMMAND: ...`).
std::optional<nlohmann::json> call(const CtlArgs& args, const std::string& command,
                                   const std::string& method, const std::string& path,
                                   const nlohmann::json& body = nullptr);
// The answer as --json prints it, or through `print`; 1 when there is none.
int show(const CtlArgs& args, const std::optional<nlohmann::json>& body,
         const std::function<void(const nlohmann::json&)>& print);

}  // namespace ductus::ctl
