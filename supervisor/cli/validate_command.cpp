#include "supervisor/cli/validate_command.h"

#include <uv.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>

#include "common/command_line.h"
#include "common/config/duration.h"
#include "common/config/loader.h"
#include "common/uv_handle.h"
#include "schema/ownership.h"
#include "schema/pg_connection.h"
#include "schema/pg_error.h"
#include "supervisor/cli/retention_command.h"
#include "supervisor/cli/start_checks.h"

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
  bool strict = false;   // --strict: an unset environment variable is an error
  std::string database;  // --database: also list the retention
};

nlohmann::json diagnosticsJson(const Diagnostics& list) {
  nlohmann::json out = nlohmann::json::array();
  for (auto& d : list)
    out.push_back({{"file", d.file},
                   {"line", d.line},
                   {"column", d.column},
                   {"key", d.keyPath},
                   {"message", d.message}});
  return out;
}

// After the files: what would still keep the project from starting (see
// start_checks.h), as errors of the same kind.
void checkStartable(LoadOutcome& outcome) {
  Diagnostics more = supervisor::checkCertificateFiles(*outcome.project);
  for (auto& d : supervisor::checkInterfaceCode(*outcome.project)) more.push_back(std::move(d));
  if (more.empty()) return;
  outcome.diagnostics = std::move(more);
  std::stable_sort(outcome.diagnostics.begin(), outcome.diagnostics.end(),
                   [](const Diagnostic& a, const Diagnostic& b) {
                     return std::tie(a.file, a.line, a.column) < std::tie(b.file, b.line, b.column);
                   });
  outcome.project.reset();
}

int validate(const ValidateArgs& args) {
  const std::string& project = args.project;
  const bool json = args.json;
  auto outcome = loadProjectWithDiagnostics(project, args.options);
  if (outcome.project) checkStartable(outcome);
  const char* byName =
      "no secrets key (DUCTUS_SECRETS_KEY or secrets.key_file): secrets were checked by name only";
  if (json) {
    nlohmann::json out = {{"ok", outcome.project.has_value()},
                          {"secrets_checked_by_name_only", outcome.secretsCheckedByNameOnly},
                          {"warnings", diagnosticsJson(outcome.warnings)}};
    if (outcome.project) {
      nlohmann::json list = nlohmann::json::array();
      for (auto& i : outcome.project->interfaces) list.push_back(interfaceJson(i));
      out["interfaces"] = list;
    } else {
      out["errors"] = diagnosticsJson(outcome.diagnostics);
    }
    std::puts(out.dump(2).c_str());
    return outcome.project ? 0 : 1;
  }
  for (auto& w : outcome.warnings) std::printf("warning: %s\n", w.toString().c_str());
  if (outcome.project) {
    for (auto& i : outcome.project->interfaces) std::puts(summaryLine(i).c_str());
    if (outcome.secretsCheckedByNameOnly) std::printf("note: %s\n", byName);
    std::printf("%s: %zu interface%s, valid\n", project.c_str(), outcome.project->interfaces.size(),
                outcome.project->interfaces.size() == 1 ? "" : "s");
    return 0;
  }
  for (auto& d : outcome.diagnostics) std::puts(d.toString().c_str());
  if (outcome.secretsCheckedByNameOnly) std::printf("note: %s\n", byName);
  std::printf("%s: %zu error%s\n", project.c_str(), outcome.diagnostics.size(),
              outcome.diagnostics.size() == 1 ? "" : "s");
  return 1;
}

// The lanes guard the engine runs at start (supervisor/ownership.h), read
// only: pending messages in lanes a lowered ordering.partitions would drop.
// 0 when none (or nothing was stored yet), 1 when the start would be
// refused or the database could not be asked.
int checkLanes(const ValidateArgs& args) {
  auto project = loadProject(args.project, args.options);
  if (!project) return 1;  // validate() said why
  std::vector<store::LaneCount> counts;
  for (auto& i : project->interfaces)
    if (!i.respondMode()) counts.push_back({i.name, i.partitionCount()});
  uv_loop_t loop;
  uv_loop_init(&loop);
  std::optional<Result<std::vector<store::StrandedLane>>> out;
  {
    store::PgConnection conn(&loop);
    conn.connect(args.database, [&](Status s) {
      if (!s) {
        out.emplace(s.error());
        return;
      }
      store::strandedLanes(conn, counts, [&](auto r) { out.emplace(std::move(r)); });
    });
    while (!out && uv_run(&loop, UV_RUN_ONCE)) {
    }
  }
  closeLoop(&loop);
  if (!out) out.emplace(Error{"the database did not answer"});
  // 42P01: no tables yet, so nothing is stored in any lane.
  if (!*out && !store::pg::undefinedTable(out->error())) {
    std::fprintf(stderr, "lanes: not checked: %s\n", out->error().message.c_str());
    return 1;
  }
  if (!*out || (*out)->empty()) {
    std::printf("lanes: every pending message is in a lane the project keeps\n");
    return 0;
  }
  for (auto& line : store::describeStranded(**out, counts))
    std::printf("lanes: %s\n", line.c_str());
  std::printf("the engine would refuse to start with this project on this database\n");
  return 1;
}

}  // namespace

void addValidateCommand(CLI::App& ductus, int& exitCode) {
  auto args = std::make_shared<ValidateArgs>();
  args->options.secretsByNameWithoutKey = true;
  auto* cmd =
      ductus.add_subcommand("validate", "check a project's files and print a line per interface");
  addProjectArgument(*cmd, args->project);
  addEnvironmentOption(*cmd, args->options.environment);
  cmd->add_flag("--json", args->json, "print the result as a JSON object, for editors and CI");
  cmd->add_flag("--strict", args->strict,
                "an environment variable the project names that is not set in this shell is an "
                "error (as `ductus run` finds it), not a warning");
  cmd->add_option("--database", args->database,
                  "also check the project against this database: pending messages in lanes a "
                  "lowered ordering.partitions would drop, and each interface's retention "
                  "tier and partitions (as `ductus retention` does)")
      ->type_name("URL");
  cmd->footer(
      "Loads ductus.yaml, resources.yaml and interfaces/*/interface.yaml with\n"
      "${env:NAME} and ${secret:NAME} substituted (secrets/ENV.json, opened with\n"
      "DUCTUS_SECRETS_KEY or ductus.yaml's secrets.key_file; without a key, each\n"
      "secret is checked by name only; a variable not set in this shell is a\n"
      "warning naming it and where it is used, an error with --strict). Then\n"
      "loads every certificates: entry as the engine does (an unreadable file, a\n"
      "key that doesn't match, an expired certificate: an error naming it) and\n"
      "every interface's code in a confined worker, checks that it exports\n"
      "each function interface.yaml names, and refuses kinds this engine can't\n"
      "run yet: valid means the engine will start (given the variables it warned\n"
      "of). Prints one line per interface and exits 0, or every error as\n"
      "file:line:column: key: message and exits 1. Needs no database; with\n"
      "--database, the lanes guard the engine runs at start is run read-only (a\n"
      "lowered ordering.partitions while messages wait in the lanes it drops: exit\n"
      "1), and a valid project's retention (tiers, partitions, the next drop) is\n"
      "listed too.");
  cmd->callback([args, &exitCode] {
    args->options.unsetEnvIsWarning = !args->strict;
    exitCode = validate(*args);
    if (exitCode == 0 && !args->database.empty() && !args->json) {
      int lanes = checkLanes(*args);
      std::printf("\n");
      exitCode = showRetention(args->project, args->database, args->options.environment);
      if (lanes != 0) exitCode = lanes;
    }
  });
}

}  // namespace ductus::supervisor
