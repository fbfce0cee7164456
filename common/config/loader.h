// loadProject: reads a project folder (ductus.yaml, resources.yaml,
// interfaces/<name>/interface.yaml), substitutes ${env:} and ${secret:},
// and checks all of it, before anything touches a database. Blocking file
// reads: it runs before the engine's loop starts, or in a CLI command.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "common/config/diagnostic.h"
#include "common/config/model.h"
#include "common/config/substitute.h"
#include "common/result.h"

namespace ductus::config {

struct LoadOptions {
  // Which secrets/<env>.json ${secret:} reads.
  std::string environment = "prod";
  // ${env:NAME}; unset means the process environment.
  Substituter::EnvLookup env;
  // The secrets key text; unset means DUCTUS_SECRETS_KEY. Either way, an
  // empty one means the key file named in ductus.yaml.
  std::optional<std::string> secretsKey;
  // With no key at all, check each ${secret:NAME} by name only (the file
  // keeps names in clear) and leave its value out: for `ductus validate`,
  // so CI can check a project without its production key. The project
  // loaded this way is for checking, never for running.
  bool secretsByNameWithoutKey = false;
  // An unset ${env:NAME} is a warning (LoadOutcome::warnings) and its value
  // left out, instead of an error: for `ductus validate` (CI without
  // production's environment) and `ductus try`. For checking, never for running.
  bool unsetEnvIsWarning = false;
};

struct LoadOutcome {
  std::optional<Project> project;  // set only when diagnostics is empty
  Diagnostics diagnostics;         // every mistake, in file order
  bool secretsCheckedByNameOnly = false;  // see LoadOptions::secretsByNameWithoutKey
  Diagnostics warnings;  // see LoadOptions::unsetEnvIsWarning; in file order
};

LoadOutcome loadProjectWithDiagnostics(const std::filesystem::path& root, const LoadOptions& options);

// The project, or an Error (code "config") whose message lists every
// diagnostic, one per line.
Result<Project> loadProject(const std::filesystem::path& root, const LoadOptions& options);

// The environment a command uses when --env is not given: DUCTUS_ENV, else "prod".
std::string defaultEnvironment();

// The secrets key file named in ductus.yaml (empty when none), for the
// secret commands, which must not need the rest of the project to be valid.
Result<std::filesystem::path> secretsKeyFileOf(const std::filesystem::path& root);

}  // namespace ductus::config
