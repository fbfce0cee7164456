#include "tests/common/config/project_dir.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <fstream>
#include <map>

namespace ductus::config::test {

namespace fs = std::filesystem;

ProjectDir::ProjectDir() {
  std::string tmpl = (fs::temp_directory_path() / "ductus-config-XXXXXX").string();
  if (!mkdtemp(tmpl.data())) ADD_FAILURE() << "mkdtemp failed";
  root_ = tmpl;
  write("ductus.yaml", "api: { listen: 127.0.0.1:7700 }\n");
}

ProjectDir::~ProjectDir() {
  std::error_code ec;
  fs::remove_all(root_, ec);
}

fs::path ProjectDir::write(const std::string& rel, const std::string& text) const {
  fs::path p = root_ / rel;
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary | std::ios::trunc) << text;
  return p;
}

void ProjectDir::iface(const std::string& name, const std::string& yaml) const {
  write("interfaces/" + name + "/interface.yaml", yaml);
  write("interfaces/" + name + "/transform.js", "export function transform(m) { return m; }\n");
}

LoadOutcome ProjectDir::load(LoadOptions options) const {
  if (!options.env) options.env = [](const std::string&) -> std::optional<std::string> { return std::nullopt; };
  return loadProjectWithDiagnostics(root_, options);
}

std::string ProjectDir::errors(LoadOptions options) const {
  auto outcome = load(std::move(options));
  std::string prefix = root_.string() + "/";
  std::string out;
  for (auto& d : outcome.diagnostics) {
    std::string line = d.toString();
    if (line.rfind(prefix, 0) == 0) line = line.substr(prefix.size());
    out += line + "\n";
  }
  return out;
}

LoadOptions withEnv(std::initializer_list<std::pair<const char*, const char*>> vars) {
  std::map<std::string, std::string> env;
  for (auto& [k, v] : vars) env[k] = v;
  LoadOptions o;
  o.env = [env](const std::string& name) -> std::optional<std::string> {
    auto it = env.find(name);
    if (it == env.end()) return std::nullopt;
    return it->second;
  };
  return o;
}

}  // namespace ductus::config::test
