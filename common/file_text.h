// A small file read whole, or replaced whole.
//
// Read whole, with a bound: project files an operator names
// (certificates, keys, secrets) are kilobytes, and a wrong path to a disk
// image must not be read into memory.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "common/result.h"

namespace ductus {

// The file's bytes; an error naming the file when it is missing,
// unreadable or larger than `limit`.
Result<std::string> readFileBounded(const std::filesystem::path& file, std::uintmax_t limit);

// Replaces `file` with `text` so a reader sees the old bytes or the new,
// never half: written to file + ".tmp" with `mode`, fsync'd, renamed over.
Status replaceFile(const std::filesystem::path& file, const std::string& text,
                   unsigned mode = 0600);

}  // namespace ductus
