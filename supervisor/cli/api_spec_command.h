// `ductus api-spec`: prints the REST API's OpenAPI 3.1 document, the same
// one a running engine serves at GET /api/v1/openapi.json, without an
// engine, a project or a database: for client generators and reviews.
#pragma once

namespace CLI {
class App;
}

namespace ductus::supervisor {

// See common/command_line.h for how commands are added and run.
void addApiSpecCommand(CLI::App& ductus, int& exitCode);

}  // namespace ductus::supervisor
