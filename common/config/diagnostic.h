// Diagnostic: one mistake in a project's files, placed where a person can
// find it ("interfaces/adt/interface.yaml:12:5: destination.retry: ...").
#pragma once

#include <string>
#include <vector>

namespace ductus::config {

// A place in a project file. Lines and columns are 1-based, as editors count;
// 0 means "the file as a whole" (a missing file, a cross-file check).
struct Location {
  std::string file;
  int line = 0;
  int column = 0;
};

struct Diagnostic {
  std::string file;
  int line = 0;
  int column = 0;
  std::string keyPath;  // "destinations.lab.retry.max_attempts"; empty for the whole file
  std::string message;  // what is wrong and what was expected

  // "file:line:column: keyPath: message" (parts that are unknown left out).
  std::string toString() const;
};

using Diagnostics = std::vector<Diagnostic>;

inline Diagnostic diagnosticAt(const Location& at, std::string keyPath, std::string message) {
  return Diagnostic{at.file, at.line, at.column, std::move(keyPath), std::move(message)};
}

}  // namespace ductus::config
