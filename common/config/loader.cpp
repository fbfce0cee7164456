#include "common/config/loader.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <sstream>
#include <thread>

#include "common/config/checks.h"
#include "common/config/project_files.h"
#include "common/config/yaml_reader.h"

namespace ductus::config {
namespace {

namespace fs = std::filesystem;

// Project files are written by hand; a megabyte is far past any real one,
// and the bound keeps a wrong path (a log file, a device) from being read.
constexpr std::uintmax_t kMaxYamlBytes = 1u << 20;

// Reads and parses one YAML file; a missing optional file is an empty
// mapping. nullopt (with a diagnostic) when it can't be read or parsed.
std::optional<YAML::Node> readYaml(const fs::path& path, const std::string& shown, bool required,
                                   Diagnostics& out) {
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    if (required)
      out.push_back(Diagnostic{shown, 0, 0, "",
                               "not found: a project folder has a ductus.yaml (is this the project's folder?)"});
    else return YAML::Node(YAML::NodeType::Map);
    return std::nullopt;
  }
  auto size = fs::file_size(path, ec);
  if (ec || size > kMaxYamlBytes) {
    out.push_back(Diagnostic{shown, 0, 0, "",
                             ec ? "cannot read: " + ec.message()
                                : "too large (" + std::to_string(size) + " bytes; at most 1 MB)"});
    return std::nullopt;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    out.push_back(Diagnostic{shown, 0, 0, "", "cannot read: " + std::string(std::strerror(errno))});
    return std::nullopt;
  }
  std::ostringstream text;
  text << in.rdbuf();
  try {
    YAML::Node n = YAML::Load(text.str());
    if (n.IsNull()) return YAML::Node(YAML::NodeType::Null);
    return n;
  } catch (const YAML::Exception& e) {
    out.push_back(Diagnostic{shown, e.mark.is_null() ? 0 : e.mark.line + 1,
                             e.mark.is_null() ? 0 : e.mark.column + 1, "", "not valid YAML: " + e.msg});
    return std::nullopt;
  }
}

bool isValidInterfaceName(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_')) return false;
  return true;
}

std::string shownPath(const fs::path& root, const fs::path& rel) { return (root / rel).string(); }

// One interface's folder: its interface.yaml parsed and its module found.
// nullopt where the folder can't make an interface (said in `out`).
std::optional<InterfaceConfig> loadInterface(const fs::path& root, const fs::path& folder,
                                             const EngineConfig& engine, Substituter& subst,
                                             Diagnostics& out) {
  std::error_code ec;
  std::string name = folder.filename().string();
  fs::path rel = fs::path("interfaces") / name / "interface.yaml";
  std::string file = shownPath(root, rel);
  if (!isValidInterfaceName(name)) {
    out.push_back(
        Diagnostic{shownPath(root, fs::path("interfaces") / name), 0, 0, "",
                   "`" + name +
                       "` is not a valid interface name (lower-case letters, digits, - and _, "
                       "at most 64)"});
    return std::nullopt;
  }
  if (!fs::exists(folder / "interface.yaml", ec)) {
    out.push_back(
        Diagnostic{file, 0, 0, "", "not found: every interface folder has an interface.yaml"});
    return std::nullopt;
  }
  auto doc = readYaml(folder / "interface.yaml", file, true, out);
  if (!doc) return std::nullopt;
  InterfaceConfig iface;
  iface.name = name;
  iface.folder = folder;
  iface.file = file;
  iface.retention = engine.retention;
  iface.maxMessageBytes = engine.maxMessageBytes;
  YamlReader r(file, out, subst);
  parseInterface(r, *doc, iface);
  if (!iface.code.empty() && !fs::exists(folder / iface.code, ec)) {
    Location at = YamlReader::has(*doc, "code") ? r.at((*doc)["code"]) : Location{file, 0, 0};
    out.push_back(
        diagnosticAt(at, "code",
                     shownPath(root, fs::path("interfaces") / name / iface.code) +
                         " not found: the interface's module (code:, default transform.js)"));
  }
  return iface;
}

}  // namespace

std::string defaultEnvironment() {
  const char* e = std::getenv("DUCTUS_ENV");
  return e && *e ? e : "prod";
}

LoadOutcome loadProjectWithDiagnostics(const fs::path& root, const LoadOptions& options) {
  LoadOutcome outcome;
  Diagnostics& out = outcome.diagnostics;
  Project project;
  project.root = root;
  project.environment = options.environment;

  Substituter::EnvLookup env = options.env;
  if (!env)
    env = [](const std::string& name) -> std::optional<std::string> {
      const char* v = std::getenv(name.c_str());
      return v ? std::optional<std::string>(v) : std::nullopt;
    };
  std::optional<std::string> keyText = options.secretsKey;
  if (!keyText)
    if (const char* k = std::getenv("DUCTUS_SECRETS_KEY"); k && *k) keyText = k;
  bool envOk = !options.environment.empty() &&
               options.environment.find_first_of("/\\.") == std::string::npos;
  if (!envOk)
    out.push_back(Diagnostic{root.string(), 0, 0, "",
                             "environment `" + options.environment + "` is not a plain name"});
  Substituter subst(env, root / "secrets" / (options.environment + ".json"), keyText, {});
  if (options.secretsByNameWithoutKey) subst.checkSecretsByNameWithoutKey();
  if (options.unsetEnvIsWarning) subst.warnOfUnsetEnv();

  std::string engineFile = shownPath(root, "ductus.yaml");
  if (auto doc = readYaml(root / "ductus.yaml", engineFile, true, out)) {
    // The key file must be known before any ${secret:}, including the
    // database URL in this same file: read it first.
    YamlReader keyReader(engineFile, out, subst);
    Diagnostics ignored;
    YamlReader quiet(engineFile, ignored, subst);
    if (doc->IsMap() && (*doc)["secrets"].IsMap())
      if (auto kf = quiet.text((*doc)["secrets"], "key_file", "secrets")) {
        fs::path p(*kf);
        subst.setKeyFile(p.is_absolute() ? p : root / p);
      }
    project.engine = parseEngine(keyReader, *doc, root);
  }
  std::string resourcesFile = shownPath(root, "resources.yaml");
  if (auto doc = readYaml(root / "resources.yaml", resourcesFile, false, out)) {
    YamlReader r(resourcesFile, out, subst);
    project.resources = parseResources(r, *doc, root);
  }

  fs::path interfaces = root / "interfaces";
  std::error_code ec;
  std::vector<fs::path> folders;
  if (fs::is_directory(interfaces, ec))
    for (auto& entry : fs::directory_iterator(interfaces, ec))
      if (entry.is_directory() && entry.path().filename().string().front() != '.')
        folders.push_back(entry.path());
  std::sort(folders.begin(), folders.end());
  if (folders.empty())
    out.push_back(Diagnostic{shownPath(root, "interfaces"), 0, 0, "",
                             "no interfaces: each is a folder interfaces/<name>/ with an interface.yaml"});
  // Interface files are read and parsed on two threads when there are
  // many: 1,001 of them took 100 ms on one core, before anything else of
  // the start could run. Each thread has its own substituter and
  // diagnostics, merged in folder order.
  constexpr size_t kParallelFrom = 64;
  size_t split = folders.size() >= kParallelFrom ? folders.size() / 2 : folders.size();
  std::vector<InterfaceConfig> second;
  Diagnostics secondOut;
  Substituter secondSubst = subst.sibling();
  std::exception_ptr secondFailed;
  std::jthread helper;  // joined on every way out, an exception's too
  if (split < folders.size())
    helper = std::jthread([&] {
      try {
        for (size_t i = split; i < folders.size(); ++i)
          if (auto f = loadInterface(root, folders[i], project.engine, secondSubst, secondOut))
            second.push_back(std::move(*f));
      } catch (...) {
        secondFailed = std::current_exception();  // rethrown where a one-thread read would throw
      }
    });
  for (size_t i = 0; i < split; ++i)
    if (auto f = loadInterface(root, folders[i], project.engine, subst, out))
      project.interfaces.push_back(std::move(*f));
  if (helper.joinable()) {
    helper.join();
    if (secondFailed) std::rethrow_exception(secondFailed);
    for (auto& f : second) project.interfaces.push_back(std::move(f));
    for (auto& d : secondOut) out.push_back(std::move(d));
    subst.absorb(std::move(secondSubst));
  }

  checkRoutes(project, out);
  checkEndpoints(project, out);
  checkResources(project, out);
  checkCertificates(project, out);
  checkSftpFiles(project, out);

  std::stable_sort(out.begin(), out.end(), [](const Diagnostic& a, const Diagnostic& b) {
    return std::tie(a.file, a.line, a.column) < std::tie(b.file, b.line, b.column);
  });
  Diagnostics warnings = projectWarnings(project);
  if (out.empty()) outcome.project = std::move(project);
  outcome.secretsCheckedByNameOnly = subst.checkedByNameOnly();
  outcome.warnings = std::move(subst.warnings());
  for (auto& w : warnings) outcome.warnings.push_back(std::move(w));
  std::stable_sort(outcome.warnings.begin(), outcome.warnings.end(),
                   [](const Diagnostic& a, const Diagnostic& b) {
                     return std::tie(a.file, a.line, a.column) < std::tie(b.file, b.line, b.column);
                   });
  return outcome;
}

Result<Project> loadProject(const fs::path& root, const LoadOptions& options) {
  auto outcome = loadProjectWithDiagnostics(root, options);
  if (outcome.project) return std::move(*outcome.project);
  std::string message;
  for (auto& d : outcome.diagnostics) message += (message.empty() ? "" : "\n") + d.toString();
  return Error{message, ErrorKind::Config};
}

Result<fs::path> secretsKeyFileOf(const fs::path& root) {
  Diagnostics out;
  auto doc = readYaml(root / "ductus.yaml", shownPath(root, "ductus.yaml"), true, out);
  if (!doc) return Error{out.empty() ? "cannot read ductus.yaml" : out.front().toString()};
  if (!doc->IsMap() || !(*doc)["secrets"].IsMap()) return fs::path();
  YAML::Node kf = (*doc)["secrets"]["key_file"];
  if (!kf.IsDefined() || !kf.IsScalar()) return fs::path();
  fs::path p(kf.Scalar());
  return p.is_absolute() ? p : root / p;
}

}  // namespace ductus::config
