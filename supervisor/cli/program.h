// The whole command line of `ductus`, built in one place: main() parses argv
// with it, and `ductus reference` describes it (cli.md, the man pages) from
// the same parser, so the reference says what --help says.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>

namespace ductus::supervisor {

// Every command added; each leaves its exit code in `exitCode`. `worker`
// is listed only: main() hands it to the worker before this parser runs.
std::unique_ptr<CLI::App> makeDuctusProgram(int& exitCode);

}  // namespace ductus::supervisor
