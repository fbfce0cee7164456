// The whole command line of ductusctl, built in one place: main() parses
// argv with it, and `ductus reference` describes it (cli.md, the man pages)
// from the same parser, so the reference says what --help says.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>

namespace ductus::ctl {

// Every command added; each leaves its exit code in `exitCode`.
std::unique_ptr<CLI::App> makeCtlProgram(int& exitCode);

}  // namespace ductus::ctl
