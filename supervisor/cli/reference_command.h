// `ductus reference docs|man [--check] DIR` and `ductus types --out DIR`:
// the references and JSON Schemas written from the binary itself
// (supervisor/cli/reference.h).
#pragma once

#include <CLI/CLI.hpp>

namespace ductus::supervisor {

void addReferenceCommands(CLI::App& ductus, int& exitCode);

}  // namespace ductus::supervisor
