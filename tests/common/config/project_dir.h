// A throwaway project folder for config tests: write files, load, remove.
#pragma once

#include <filesystem>
#include <string>

#include "common/config/loader.h"

namespace ductus::config::test {

class ProjectDir {
 public:
  ProjectDir();  // a fresh folder with a minimal ductus.yaml
  ~ProjectDir();
  ProjectDir(const ProjectDir&) = delete;
  ProjectDir& operator=(const ProjectDir&) = delete;

  const std::filesystem::path& root() const { return root_; }
  // Writes root/rel (creating folders); returns its path.
  std::filesystem::path write(const std::string& rel, const std::string& text) const;
  // Writes interfaces/<name>/interface.yaml and an empty transform.js.
  void iface(const std::string& name, const std::string& yaml) const;

  LoadOutcome load(LoadOptions options = {}) const;
  // Every diagnostic as "file:line:col: key: message", one per line, with
  // the folder's own path taken off so tests read "interfaces/a/...".
  std::string errors(LoadOptions options = {}) const;

 private:
  std::filesystem::path root_;
};

// An options value whose ${env:} sees only the given variables.
LoadOptions withEnv(std::initializer_list<std::pair<const char*, const char*>> vars);

}  // namespace ductus::config::test
