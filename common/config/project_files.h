// Parsers of each project file into the model; each records its mistakes in
// the reader and returns what it could read (defaults where a value was
// wrong), so later checks still run and every error is reported at once.
#pragma once

#include <yaml-cpp/yaml.h>

#include <filesystem>

#include "common/config/model.h"
#include "common/config/yaml_reader.h"

namespace ductus::config {

// ductus.yaml
EngineConfig parseEngine(YamlReader& r, const YAML::Node& root, const std::filesystem::path& projectRoot);

// resources.yaml
Resources parseResources(YamlReader& r, const YAML::Node& root);

// interfaces/<name>/interface.yaml; name, folder and file are already set
// in iface, and the engine's defaults (retention, max size) applied.
void parseInterface(YamlReader& r, const YAML::Node& root, InterfaceConfig& iface);

}  // namespace ductus::config
