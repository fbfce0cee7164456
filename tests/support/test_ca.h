// A throwaway certificate authority for tests: a CA key and certificate in
// a folder of the test's, and leaves it signs (server and client
// authentication, DNS and IP names, any validity, expired ones too), all
// written as PEM files the engine's certificates: entries can name. Made
// with OpenSSL's own API, not ours (common/tls is what the tests try).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace ductus::test {

struct Issued {
  std::filesystem::path cert;   // the leaf's PEM
  std::filesystem::path key;    // its key's PEM (PKCS#8, 0600)
  std::filesystem::path chain;  // the leaf then the CA, PEM
};

class TestCa {
 public:
  // A CA in `dir` (made if missing): ca.pem and ca.key, subject /CN=<cn>.
  explicit TestCa(std::filesystem::path dir, std::string cn = "Ductus Test CA");

  const std::filesystem::path& cert() const { return cert_; }
  const std::filesystem::path& key() const { return key_; }
  const std::filesystem::path& dir() const { return dir_; }

  // A leaf signed by this CA, written to <dir>/<name>.pem and <name>.key.
  // subject: "/CN=lab-analyzer/O=Hospital". Valid from a day ago for `days`
  // days; days < 0 makes one that expired -days days ago. ecKey false: RSA
  // 2048. Aborts the test on an OpenSSL failure.
  Issued issue(const std::string& name, const std::string& subject,
               const std::vector<std::string>& dnsNames = {"localhost"},
               const std::vector<std::string>& ips = {"127.0.0.1"}, int days = 30,
               bool ecKey = true) const;

 private:
  std::filesystem::path dir_;
  std::filesystem::path cert_;
  std::filesystem::path key_;
};

}  // namespace ductus::test
