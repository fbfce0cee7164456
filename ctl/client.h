// ductusctl's commands over the engine's control socket
// (supervisor/control_socket.h): one request, one answer, printed as a
// table for people or as the engine's JSON (--json) for scripts.
//
// Exit codes: 0 answered, 1 the engine isn't running, refused the caller
// or answered an error, 2 called wrong (common/command_line.h).
#pragma once

#include <CLI/CLI.hpp>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/result.h"

namespace ductus::ctl {

// Sends `request` as one line to the socket at `path` and reads one answer
// line. Errors are said for the operator: "the engine isn't running (no
// control socket at PATH)", "permission denied: the engine runs as uid N".
// An answer with "ok": false is returned as it came.
// `timeoutMs`: how long the answer may take (30 s unless said).
Result<nlohmann::json> controlRequest(const std::string& path, const nlohmann::json& request,
                                      int timeoutMs = 30'000);

// `handover` (ductusctl handover, ductus handover): asks, waits for the
// end of the handover, prints the new pid (or the JSON); 0, or 1 with the
// reason on stderr.
int requestHandover(const std::string& path, bool json);

// status, interfaces.
void addCtlCommands(CLI::App& program, int& exitCode);

// What every ductusctl command takes: --control PATH and --json.
struct CtlArgs {
  std::string control;
  bool json = false;
};
void addCommonOptions(CLI::App& cmd, CtlArgs& args);

// A JSON value as a table cell: "-" for null, yes/no, strings bare.
std::string ctlText(const nlohmann::json& v);
// Columns padded to their widest cell, two spaces apart; the first row is
// the header.
void printTable(const std::vector<std::vector<std::string>>& rows);

}  // namespace ductus::ctl
