#include "supervisor/cli/api_spec_command.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "api/openapi.h"
#include "api/routes.h"

namespace ductus::supervisor {

void addApiSpecCommand(CLI::App& ductus, int& exitCode) {
  auto* cmd = ductus.add_subcommand("api-spec", "print the REST API's OpenAPI 3.1 document");
  cmd->footer(
      "Prints the document a running engine serves at GET /api/v1/openapi.json,\n"
      "made from the same route table, so it lists exactly the operations the\n"
      "server answers. Needs no project and no database.");
  cmd->callback([&exitCode] {
    // The routes with nothing behind them: only their table is read.
    std::string doc = api::openApiDocument(api::allRoutes({}));
    std::fwrite(doc.data(), 1, doc.size(), stdout);
    std::fputc('\n', stdout);
    exitCode = std::fflush(stdout) == 0 ? 0 : 1;
  });
}

}  // namespace ductus::supervisor
