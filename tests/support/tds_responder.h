// tds_responder.py (the SQL Server stand-in) run for one test: a throwaway
// folder for its record, an ephemeral port, and what it recorded as JSON.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/script_server.h"
#include "tests/support/test_env.h"

namespace ductus::test {

class TdsResponder {
 public:
  static constexpr const char* kUser = "sa";
  static constexpr const char* kPassword = "S3;cr}e{t=!}";  // ; = { } try the connection string

  // tls: the certificate and key it presents (TLS 1.2 inside PRELOGIN);
  // without them it answers that it cannot encrypt.
  explicit TdsResponder(const std::filesystem::path& cert = {},
                        const std::filesystem::path& key = {}) {
    char tmpl[] = "/tmp/ductus-tds.XXXXXX";
    if (mkdtemp(tmpl)) dir_ = tmpl;
    std::vector<std::string> argv = {"/usr/bin/python3", supportScript("tds_responder.py"),
                                     "--user",           kUser,
                                     "--password",       kPassword,
                                     "--record",         record().string()};
    if (!cert.empty()) argv.insert(argv.end(), {"--tls", cert.string(), key.string()});
    server_ = std::make_unique<ScriptServer>(argv);
  }
  ~TdsResponder() {
    server_.reset();
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }

  uint16_t port() const { return server_->port(); }
  std::filesystem::path record() const { return dir_ / "record.jsonl"; }

  // Every request so far of that kind ("login", "batch", "rpc", ...).
  std::vector<nlohmann::json> recorded(const std::string& kind) const {
    std::vector<nlohmann::json> out;
    std::istringstream lines(fileText(record()));
    for (std::string line; std::getline(lines, line);) {
      auto j = nlohmann::json::parse(line, nullptr, false);
      if (!j.is_discarded() && j.value("kind", "") == kind) out.push_back(j);
    }
    return out;
  }

 private:
  std::filesystem::path dir_;
  std::unique_ptr<ScriptServer> server_;
};

}  // namespace ductus::test
