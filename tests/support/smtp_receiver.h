// An SMTP server for the alert e-mail tests: tests/support/smtp_server.py
// (Debian's aiosmtpd, a server we did not write) run by ScriptServer, with
// a throwaway folder it saves each message in.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/script_server.h"

namespace ductus::test {

struct ReceivedMail {
  std::string data;  // the message as received (headers, blank line, body)
  std::string from;
  std::vector<std::string> to;
  bool tls = false;  // STARTTLS or implicit TLS
  std::string auth;  // the user signed in, "" for none
  // The header's value as written (folded lines joined), "" when absent.
  std::string header(const std::string& name) const {
    std::string wanted = name + ":";
    std::istringstream in(data);
    std::string line, value;
    bool inIt = false;
    while (std::getline(in, line)) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.empty()) break;
      if (inIt && (line[0] == ' ' || line[0] == '\t')) {
        value += line;
        continue;
      }
      if (inIt) return value;
      if (line.compare(0, wanted.size(), wanted) == 0) {
        inIt = true;
        value = line.substr(wanted.size());
        if (!value.empty() && value[0] == ' ') value.erase(0, 1);
      }
    }
    return value;
  }
  // The header lines' names, in order (continuations left out).
  std::vector<std::string> headerNames() const {
    std::vector<std::string> out;
    std::istringstream in(data);
    std::string line;
    while (std::getline(in, line)) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.empty()) break;
      if (line[0] == ' ' || line[0] == '\t') continue;
      out.push_back(line.substr(0, line.find(':')));
    }
    return out;
  }
  std::string body() const {
    size_t at = data.find("\r\n\r\n");
    return at == std::string::npos ? "" : data.substr(at + 4);
  }
};

class SmtpReceiver {
 public:
  struct Options {
    std::string starttlsCert, starttlsKey;  // both: STARTTLS offered
    std::string implicitCert, implicitKey;  // both: smtps
    std::string auth;                       // "user:password": AUTH required
  };
  explicit SmtpReceiver(const Options& o = {}) {
    char tmpl[] = "/tmp/ductus-smtp-XXXXXX";
    if (!mkdtemp(tmpl)) {
      ADD_FAILURE() << "mkdtemp failed";
      return;
    }
    dir_ = tmpl;
    // Debian's python: python3-aiosmtpd is installed for it alone.
    std::vector<std::string> argv{"/usr/bin/python3", supportScript("smtp_server.py"), "--dir",
                                  dir_.string()};
    if (!o.starttlsCert.empty()) argv.insert(argv.end(), {"--starttls", o.starttlsCert, o.starttlsKey});
    if (!o.implicitCert.empty())
      argv.insert(argv.end(), {"--implicit-tls", o.implicitCert, o.implicitKey});
    if (!o.auth.empty()) argv.insert(argv.end(), {"--auth", o.auth});
    server_.emplace(argv);
    EXPECT_NE(server_->port(), 0) << "smtp_server.py did not start (is python3-aiosmtpd installed?)";
  }
  ~SmtpReceiver() {
    server_.reset();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  SmtpReceiver(const SmtpReceiver&) = delete;
  SmtpReceiver& operator=(const SmtpReceiver&) = delete;

  uint16_t port() const { return server_ ? server_->port() : 0; }

  // Every message received so far, in order.
  std::vector<ReceivedMail> messages() const {
    std::vector<ReceivedMail> out;
    for (int n = 1;; ++n) {
      auto base = dir_ / std::to_string(n);
      std::ifstream meta(base.string() + ".json");
      if (!meta) break;
      ReceivedMail m;
      auto j = nlohmann::json::parse(meta, nullptr, false);
      if (j.is_object()) {
        m.from = j.value("from", "");
        for (auto& t : j["to"]) m.to.push_back(t.get<std::string>());
        m.tls = j.value("tls", false);
        if (j["auth"].is_string()) m.auth = j["auth"].get<std::string>();
      }
      std::ifstream eml(base.string() + ".eml", std::ios::binary);
      std::stringstream ss;
      ss << eml.rdbuf();
      m.data = ss.str();
      out.push_back(std::move(m));
    }
    return out;
  }

 private:
  std::filesystem::path dir_;
  std::optional<ScriptServer> server_;
};

}  // namespace ductus::test
