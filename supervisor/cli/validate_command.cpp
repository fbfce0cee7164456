#include "supervisor/cli/validate_command.h"

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "common/config/duration.h"
#include "common/config/loader.h"

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

void usage() {
  std::puts(
      "usage: ductus validate [PROJECT] [--env ENV] [--json]\n\n"
      "Loads and checks the project folder PROJECT (default: the current folder):\n"
      "ductus.yaml, resources.yaml and interfaces/*/interface.yaml, with ${env:NAME}\n"
      "and ${secret:NAME} substituted (secrets/ENV.json; ENV defaults to $DUCTUS_ENV,\n"
      "else prod; the key from DUCTUS_SECRETS_KEY or ductus.yaml's secrets.key_file).\n"
      "Prints one line per interface and exits 0, or every error and exits 1.\n"
      "--json prints the same as a JSON object for editors and CI.");
}

}  // namespace

int validateCommand(int argc, char** argv) {
  std::string project = ".";
  bool json = false, projectGiven = false;
  LoadOptions options;
  options.environment = defaultEnvironment();
  for (int i = 2; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "--json") json = true;
    else if (a == "--env" && i + 1 < argc) options.environment = argv[++i];
    else if (a == "--help" || a == "-h") {
      usage();
      return 0;
    } else if (!a.empty() && a[0] != '-' && !projectGiven) {
      project = argv[i];
      projectGiven = true;
    } else {
      std::fprintf(stderr, "ductus validate: unknown option '%s'\n", argv[i]);
      return 2;
    }
  }

  auto outcome = loadProjectWithDiagnostics(project, options);
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

}  // namespace ductus::supervisor
