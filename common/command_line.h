// The command line of both binaries (ductus, ductusctl), built with CLI11.
// Each command adds itself to the program's CLI::App (add<Name>Command in
// its *_command.h) with a callback that runs it once the whole line parsed
// and leaves its exit code in the int it was given. This header holds what
// the two programs share: one help layout, `help COMMAND...`, `version`,
// and parse errors said in one line with exit code 2.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace ductus {

// Every usage error exits 2, CLI11's (105-114 of its own) included: the
// code the commands' own argument checks and the loops before CLI11 used,
// so a script tells "called wrong" (2) from "ran and failed" (1).
inline constexpr int kUsageError = 2;

// Call on the program's app before adding commands: subcommands copy their
// parent's formatter and group when they are created.
inline void prepareProgram(CLI::App& program) {
  // Wide enough for `--env ENV=prod (Env:DUCTUS_ENV)`; longer option texts
  // put their description on the next line, still one line.
  program.get_formatter()->column_width(36);
  program.get_formatter()->label("SUBCOMMAND", "COMMAND");
  program.group("Commands");
  program.set_help_flag("-h,--help", "print this help and exit");
}

// Call after every command is added: the footer is copied by subcommands
// created after it, and these settings are the program's alone.
inline void finishProgram(CLI::App& program, const std::string& versionLine,
                          const std::string& footer) {
  program.require_subcommand(1);
  program.set_version_flag("--version", versionLine,
                           "print the version and the commit it was built from");
  program.footer(footer);
}

// The project folder, positional and last in every command that takes one.
inline CLI::Option* addProjectArgument(CLI::App& command, std::string& project) {
  project = ".";
  return command.add_option("PROJECT", project, "the project folder (default: the current folder)")
      ->type_name("");
}

// --env ENV, DUCTUS_ENV when not given, else prod: what
// config::defaultEnvironment() answers, said in --help.
inline CLI::Option* addEnvironmentOption(CLI::App& command, std::string& environment) {
  environment = "prod";
  return command.add_option("--env", environment, "the environment: the secrets/ENV.json to use")
      ->type_name("ENV")
      ->envname("DUCTUS_ENV")
      ->capture_default_str();
}

// "ductus secret set": how `command` is typed.
inline std::string helpPath(const CLI::App& command) {
  std::string path = command.get_name();
  for (const CLI::App* p = command.get_parent(); p; p = p->get_parent())
    path = p->get_name() + " " + path;
  return path;
}

// The help of `command` as `<its path> --help` prints it. make_help, not
// help(): help() hands over to whichever subcommand was parsed, which is
// `help` itself when this runs for `ductus help ...`.
inline std::string helpOf(const CLI::App& command) {
  return command.get_formatter()->make_help(&command, helpPath(command),
                                            CLI::AppFormatMode::Normal);
}

inline const CLI::App* findCommand(const CLI::App& parent, std::string_view name) {
  for (const CLI::App* c : parent.get_subcommands([](const CLI::App*) { return true; }))
    if (c->get_name() == name) return c;
  return nullptr;
}

// `help [COMMAND...]`: what `COMMAND... --help` prints, for those who type
// the word (`ductus help secret set` too).
inline void addHelpCommand(CLI::App& program, int& exitCode) {
  auto* cmd =
      program.add_subcommand("help", "print a command's options: help run (same as run --help)");
  auto path = std::make_shared<std::vector<std::string>>();
  cmd->add_option("COMMAND", *path, "the command (and subcommand) to describe")->type_name("");
  cmd->callback([&program, &exitCode, path] {
    const CLI::App* target = &program;
    for (auto& name : *path) {
      const CLI::App* next = findCommand(*target, name);
      if (!next) {
        std::fprintf(stderr, "%s help: unknown command '%s' (see `%s --help`)\n",
                     program.get_name().c_str(), name.c_str(), helpPath(*target).c_str());
        exitCode = kUsageError;
        return;
      }
      target = next;
    }
    std::cout << helpOf(*target) << std::flush;
    exitCode = 0;
  });
}

// `version`, the same line as --version.
inline void addVersionCommand(CLI::App& program, const std::string& versionLine, int& exitCode) {
  program.add_subcommand("version", "print the version and the commit it was built from")
      ->callback([versionLine, &exitCode] {
        std::printf("%s\n", versionLine.c_str());
        exitCode = 0;
      });
}

namespace detail {

// The commands given, outermost first: {ductus, secret, set}.
inline std::vector<const CLI::App*> parsedPath(const CLI::App& program) {
  std::vector<const CLI::App*> path{&program};
  while (!path.back()->get_subcommands().empty())
    path.push_back(path.back()->get_subcommands().front());
  return path;
}

inline bool hasCommands(const CLI::App& app) {
  return !app.get_subcommands([](const CLI::App* c) { return !c->get_name().empty(); }).empty();
}

inline bool hasPositionals(const CLI::App& app) {
  return !app.get_options([](const CLI::Option* o) { return o->get_positional(); }).empty();
}

// CLI11 says a missing value as "--env: 1 required TEXT missing"; people
// read "--env needs a value" faster. Anything else is kept as CLI11 says it.
inline std::string plainMessage(const CLI::ParseError& e) {
  std::string what = e.what();
  if (dynamic_cast<const CLI::ArgumentMismatch*>(&e)) {
    auto colon = what.find(": ");
    if (colon != std::string::npos && what.find(" required ", colon) != std::string::npos &&
        what.ends_with(" missing"))
      return what.substr(0, colon) + " needs a value";
  }
  return what;
}

}  // namespace detail

// Parses argv and runs the command given (its callback). Help and --version
// print to stdout and exit 0; a mistake prints one line naming the command
// and exits kUsageError; a command missing its subcommand (`ductus`,
// `ductus secret`) prints its help to stderr. Otherwise the command's code.
inline int runProgram(CLI::App& program, int argc, char** argv, int& exitCode) {
  try {
    program.parse(argc, argv);
    return exitCode;
  } catch (const CLI::Success& e) {  // --help, --version
    return program.exit(e);
  } catch (const CLI::ParseError& e) {
    auto path = detail::parsedPath(program);
    const CLI::App& last = *path.back();
    std::string name = helpPath(last);

    // The first command on the way that kept arguments it could not place.
    std::string extra;
    const CLI::App* holder = nullptr;
    for (auto* a : path)
      if (auto left = a->remaining(false); !left.empty()) {
        extra = left.front();
        holder = a;
        break;
      }
    std::string message;
    if (holder && extra.starts_with("-")) {
      message = "unknown option '" + extra + "'";
    } else if (holder && holder == &last && detail::hasCommands(last) &&
               !detail::hasPositionals(last)) {
      message = "unknown command '" + extra + "'";
    } else if (holder) {
      message = "unexpected argument '" + extra + "'";
    } else if (dynamic_cast<const CLI::RequiredError*>(&e) && detail::hasCommands(last)) {
      std::cerr << helpOf(last) << std::flush;
      return kUsageError;
    } else {
      message = detail::plainMessage(e);
    }
    std::fprintf(stderr, "%s: %s (see `%s --help`)\n", name.c_str(), message.c_str(), name.c_str());
    return kUsageError;
  }
}

}  // namespace ductus
