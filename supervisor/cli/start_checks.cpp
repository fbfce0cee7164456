#include "supervisor/cli/start_checks.h"

#include <cstdlib>
#include <memory>
#include <regex>

#include "common/tls/certificates.h"

#include "supervisor/cli/worker_session.h"
#include "supervisor/workers/worker_pool.h"

namespace ductus::supervisor {

config::Diagnostics checkCertificateFiles(const config::Project& project,
                                          tls::Clock::time_point now) {
  config::Diagnostics out;
  for (const auto& [name, source] : project.resources.certificates) {
    auto loaded = tls::loadSource(source, now);
    if (loaded) continue;
    // The message starts with the entry's name and place
    // ("certificates.server (resources.yaml:2): ..."), which the diagnostic
    // already gives.
    std::string message = loaded.error().message;
    std::string prefix = "certificates." + name + " (" + source.at + "): ";
    if (message.rfind(prefix, 0) == 0) message.erase(0, prefix.size());
    config::Diagnostic d;
    auto colon = source.at.rfind(':');
    d.file = colon == std::string::npos ? source.at : source.at.substr(0, colon);
    if (colon != std::string::npos) d.line = std::atoi(source.at.c_str() + colon + 1);
    d.keyPath = "certificates." + name;
    d.message = message;
    out.push_back(std::move(d));
  }
  return out;
}

config::Diagnostic loadErrorDiagnostic(const std::filesystem::path& root, const std::string& error) {
  // "interfaces/x/a.js:3:9: message", "lib/u.js:3: message", "interfaces/x/a.js: message".
  static const std::regex placed(R"(^((?:interfaces|lib)/[^:\n]+?)(?::(\d+))?(?::(\d+))?: ([\s\S]*)$)");
  std::smatch m;
  if (!std::regex_match(error, m, placed)) return config::Diagnostic{root.string(), 0, 0, "", error};
  config::Diagnostic d;
  d.file = (root / m[1].str()).string();
  d.line = m[2].matched ? std::stoi(m[2].str()) : 0;
  d.column = m[3].matched ? std::stoi(m[3].str()) : 0;
  d.message = m[4].str();
  return d;
}

config::Diagnostics checkInterfaceCode(const config::Project& project, const std::string& binary) {
  config::Diagnostics out;
  WorkerSession::Options wo;
  wo.binary = binary;
  wo.heapMb = project.engine.heapMb;
  std::unique_ptr<WorkerSession> worker;
  uint32_t nextId = 1;
  for (auto& c : project.interfaces) {
    InterfaceSpec spec = interfaceSpecOf(project, c);
    auto modules = readInterfaceModules(spec);
    if (!modules) {
      out.push_back(config::Diagnostic{c.file, 0, 0, "code", modules.error().message});
      continue;
    }
    // A worker that died (a heap bomb in top-level code) is replaced, so
    // the interfaces after it are still checked.
    if (!worker || worker->exited()) {
      auto w = WorkerSession::start(wo);
      if (!w) {
        out.push_back(config::Diagnostic{c.file, 0, 0, "",
                                         "cannot start a worker to load the code: " + w.error().message});
        return out;
      }
      worker = std::move(*w);
    }
    // The module alone first: its own errors are the module's, not a
    // reference's.
    InterfaceSpec bare = spec;
    bare.functions.clear();
    if (auto s = worker->load(nextId++, bare, *modules, {}); !s) {
      out.push_back(loadErrorDiagnostic(project.root, s.error().message));
      continue;
    }
    // Then each function by itself (the module is compiled once per
    // worker), so every missing one is named at its own reference.
    for (size_t k = 0; k < spec.functions.size(); ++k) {
      InterfaceSpec one = spec;
      one.functions = {spec.functions[k]};
      auto s = worker->load(nextId++, one, *modules, {static_cast<uint32_t>(k + 1)});
      if (s) continue;
      // In respond mode the one function is respond:; else the k-th destination's.
      config::Location at = c.respondMode() ? c.respondAt : c.destinations[k].transformAt;
      std::string key = c.respondMode() ? "respond" : c.destinations[k].keyPath + ".transform";
      out.push_back(config::diagnosticAt(at, key, placeLoadError(project.root, s.error().message)));
    }
  }
  return out;
}

}  // namespace ductus::supervisor
