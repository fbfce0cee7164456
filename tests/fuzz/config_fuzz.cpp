// The project loader: common/config/loader.h's loadProjectWithDiagnostics
// on a project folder whose interfaces/fuzz/interface.yaml is the input.
// The rest of the folder is fixed and written once, in a temporary folder
// ($TMPDIR): a ductus.yaml whose database URL is a ${secret:}, a
// resources.yaml with a database and an API (so routes, api: and db names
// resolve), secrets/prod.json (sealed with a fixed key, given through
// LoadOptions), and a second interface, adt-json (source: internal), for
// routes to reach. ${env:} sees FUZZ_HOST and FUZZ_TOKEN only.
//
// Errors are fine; a crash, a sanitizer report or an exception escaping the
// loader is not. Checked beyond that: a project comes back exactly when
// there is no diagnostic, every diagnostic names a file and says something,
// and a loaded project has both interfaces.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "common/config/loader.h"
#include "common/config/secrets.h"
#include "tests/fuzz/fuzz_support.h"

namespace {

using namespace ductus;
namespace fs = std::filesystem;

constexpr const char* kKeyHex = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

void writeFile(const fs::path& p, std::string_view text) {
  fs::create_directories(p.parent_path());
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  FUZZ_CHECK(out.good(), "writing " + p.string());
}

struct Project {
  fs::path root;
  config::LoadOptions options;

  Project() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/ductus-fuzz-config-XXXXXX";
    FUZZ_CHECK(mkdtemp(pattern.data()) != nullptr, "mkdtemp " + pattern);
    root = pattern;
    std::atexit([] { std::error_code ec; fs::remove_all(project().root, ec); });

    writeFile(root / "ductus.yaml",
              "database: ${secret:DB_URL}\n"
              "api: { listen: 127.0.0.1:7700 }\n"
              "isolates: { workers: 2, heap_mb: 256 }\n"
              "retention: 3w\n"
              "max_message_size: 16MB\n");
    writeFile(root / "resources.yaml",
              "databases:\n"
              "  lab: { url: \"postgresql://lab@${env:FUZZ_HOST}/lab\", max_connections: 4 }\n"
              "apis:\n"
              "  lab-receiver:\n"
              "    url: http://127.0.0.1:8090\n"
              "    headers: { Authorization: \"Bearer ${secret:LAB_TOKEN}\" }\n"
              "    timeout: 10s\n");
    writeFile(root / "interfaces/adt-json/interface.yaml",
              "source:\n  internal: {}\nformat: json\nordering: { key: mrn }\n"
              "destination:\n  file: { path: out/, name: \"{id}.json\" }\n");
    writeFile(root / "interfaces/adt-json/transform.js", "export function transform(m) { return m; }\n");
    writeFile(root / "interfaces/fuzz/transform.js", "export function transform(m) { return m; }\n");
    writeFile(root / "interfaces/fuzz/respond.js", "export function respond(r) { return r; }\n");

    auto key = config::parseSecretsKey(kKeyHex);
    FUZZ_CHECK(key, "the fixed secrets key");
    auto secrets = config::SecretsFile::open(root / "secrets/prod.json", *key);
    FUZZ_CHECK(secrets, "opening secrets/prod.json");
    secrets->set("DB_URL", "postgresql://ductus@127.0.0.1/ductus");
    secrets->set("LAB_TOKEN", "token-1");
    secrets->set("SFTP_PASSWORD", "hunter2");
    auto saved = secrets->save();
    FUZZ_CHECK(saved, "saving secrets/prod.json");

    options.environment = "prod";
    options.secretsKey = kKeyHex;
    options.env = [](const std::string& name) -> std::optional<std::string> {
      if (name == "FUZZ_HOST") return "db.example.org";
      if (name == "FUZZ_TOKEN") return "abc";
      return std::nullopt;
    };
  }

  static Project& project();
};

Project& Project::project() {
  static Project* p = new Project();
  return *p;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::quietLogs();
  Project::project();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Project& p = Project::project();
  writeFile(p.root / "interfaces/fuzz/interface.yaml",
            std::string_view(reinterpret_cast<const char*>(data), size));
  config::LoadOutcome outcome;
  try {
    outcome = config::loadProjectWithDiagnostics(p.root, p.options);
  } catch (const std::exception& e) {
    fuzz::fail(__FILE__, __LINE__, std::string("loadProjectWithDiagnostics threw: ") + e.what());
  } catch (...) {
    fuzz::fail(__FILE__, __LINE__, "loadProjectWithDiagnostics threw something not a std::exception");
  }
  FUZZ_CHECK(outcome.project.has_value() == outcome.diagnostics.empty(),
             "a project and diagnostics, or neither");
  for (const auto& d : outcome.diagnostics) {
    FUZZ_CHECK(!d.file.empty(), "a diagnostic without a file: " + d.toString());
    FUZZ_CHECK(!d.message.empty(), "a diagnostic without a message: " + d.toString());
    FUZZ_CHECK(d.line >= 0 && d.column >= 0, "a negative place: " + d.toString());
  }
  if (outcome.project) {
    FUZZ_CHECK(outcome.project->interfaces.size() == 2, "a loaded project without both interfaces");
    FUZZ_CHECK(outcome.project->find("fuzz") != nullptr, "the fuzzed interface is not found by name");
  }
  return 0;
}
