// JSON Schemas (draft-07) of the project's files, written from the format's
// table (format.h), the one the loader checks keys against: `ductus types`
// writes them for editors (VS Code's YAML extension, through a
// `# yaml-language-server: $schema=...` line). Every mapping refuses a key
// it doesn't list (additionalProperties: false), as `validate` does.
#pragma once

#include <string>

#include "common/config/format.h"

namespace ductus::config {

// The schema of one file, as indented JSON text ending in a newline.
std::string jsonSchema(const FileFormat& file);

}  // namespace ductus::config
