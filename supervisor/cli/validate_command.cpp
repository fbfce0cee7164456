#include "supervisor/cli/validate_command.h"

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "common/config/duration.h"
#include "common/config/loader.h"
#include "supervisor/cli/command_line.h"

namespace ductus::supervisor {
namespace {

using namespace ductus::config;

// "adt-feed: mllp 127.0.0.1:2575, hl7v2 → default: file out/ (hl7v2)".
// Built from describe() texts, which hold what was written, never a
// substituted secret.
std::string summaryLine(const InterfaceConfig& i) {
  std::string s = i.name + ": " + i.sourceDescribe + ", " + formatName(i.format);
  if (i.respondMode()) return s + " \u2192 answers with " + i.respond + "()";
  s += " \u2192 ";
  for (size_t k = 0; k < i.destinations.size(); ++k) {
    auto& d = i.destinations[k];
    if (k) s += "; ";
    s += d.name + ": " + d.describe + " (" + formatName(d.output) + ")";
  }
  return s;
}

nlohmann::json interfaceJson(const InterfaceConfig& i) {
  nlohmann::json dests = nlohmann::json::array();
  for (auto& d : i.destinations)
    dests.push_back({{"name", d.name},
                     {"kind", targetKind(d.target)},
                     {"target", d.describe},
                     {"transform", d.transform},
                     {"output", formatName(d.output)}});
  return {{"name", i.name},
          {"source", sourceKind(i.source)},
          {"source_detail", i.sourceDescribe},
          {"format", formatName(i.format)},
          {"partitions", i.partitionCount()},
          {"retention", retentionName(i.retention)},
          {"timeout", formatDuration(i.timeout)},
          {"destinations", dests}};
}

struct ValidateArgs {
  std::string project = ".";
  LoadOptions options;
  bool json = false;
};

int validate(const ValidateArgs& args) {
  const std::string& project = args.project;
  const bool json = args.json;
  auto outcome = loadProjectWithDiagnostics(project, args.options);
  if (json) {
    nlohmann::json out = {{"ok", outcome.project.has_value()}};
    if (outcome.project) {
      nlohmann::json list = nlohmann::json::array();
      for (auto& i : outcome.project->interfaces) list.push_back(interfaceJson(i));
      out["interfaces"] = list;
    } else {
      nlohmann::json errors = nlohmann::json::array();
      for (auto& d : outcome.diagnostics)
        errors.push_back({{"file", d.file},
                          {"line", d.line},
                          {"column", d.column},
                          {"key", d.keyPath},
                          {"message", d.message}});
      out["errors"] = errors;
    }
    std::puts(out.dump(2).c_str());
    return outcome.project ? 0 : 1;
  }
  if (outcome.project) {
    for (auto& i : outcome.project->interfaces) std::puts(summaryLine(i).c_str());
    std::printf("%s: %zu interface%s, valid\n", project.c_str(), outcome.project->interfaces.size(),
                outcome.project->interfaces.size() == 1 ? "" : "s");
    return 0;
  }
  for (auto& d : outcome.diagnostics) std::puts(d.toString().c_str());
  std::printf("%s: %zu error%s\n", project.c_str(), outcome.diagnostics.size(),
              outcome.diagnostics.size() == 1 ? "" : "s");
  return 1;
}

}  // namespace

void addValidateCommand(CLI::App& ductus, int& exitCode) {
  auto args = std::make_shared<ValidateArgs>();
  auto* cmd =
      ductus.add_subcommand("validate", "check a project's files and print a line per interface");
  addProjectArgument(*cmd, args->project);
  addEnvironmentOption(*cmd, args->options.environment);
  cmd->add_flag("--json", args->json, "print the result as a JSON object, for editors and CI");
  cmd->footer(
      "Loads ductus.yaml, resources.yaml and interfaces/*/interface.yaml with\n"
      "${env:NAME} and ${secret:NAME} substituted (secrets/ENV.json, opened with\n"
      "DUCTUS_SECRETS_KEY or ductus.yaml's secrets.key_file). Prints one line per\n"
      "interface and exits 0, or every error as file:line:column: key: message and\n"
      "exits 1. Needs no database.");
  cmd->callback([args, &exitCode] { exitCode = validate(*args); });
}

}  // namespace ductus::supervisor
