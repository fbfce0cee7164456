// ductusctl's monitoring commands, each one of the REST API's operations
// through the control socket (as ctl/actions.h): `hotspots` (GET
// /hotspots: where each backlog waits and why), `alerts` (GET /alerts),
// `alerts ack ID` and `alerts silence ID --for 2h` (POST
// /alerts/{id}/acknowledge and /silence, audited as the local account).
#pragma once

#include <CLI/CLI.hpp>

namespace ductus::ctl {

void addCtlMonitorCommands(CLI::App& program, int& exitCode);

}  // namespace ductus::ctl
