// A real OpenLDAP server per test: Debian's /usr/sbin/slapd on 127.0.0.1 at
// a port of its own (ports.h), with an mdb database in a throwaway folder,
// loaded offline (slapadd) with base dc=hospital,dc=test: a service account
// the engine binds as, people under ou=people and groups under ou=groups.
// Access as a directory would grant it: passwords only to bind with, the
// rest to bound users only (an anonymous search finds nothing).
// changes go through Debian's ldapmodify as the rootdn, as an
// administrator's tool would make them.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "common/result.h"
#include "tests/support/test_ca.h"

namespace ductus::test {

class SlapdServer {
 public:
  static constexpr const char* kBase = "dc=hospital,dc=test";
  static constexpr const char* kServiceDn = "cn=ductus,ou=svc,dc=hospital,dc=test";
  static constexpr const char* kServicePassword = "service-Secret-1";

  SlapdServer() = default;
  ~SlapdServer();  // stops slapd and removes the folder
  SlapdServer(const SlapdServer&) = delete;
  SlapdServer& operator=(const SlapdServer&) = delete;

  // Writes the configuration and the entries (`ldif`, beside the base,
  // ou=people, ou=groups and the service account) and starts slapd; ready
  // when it answers. With `ca`: also ldaps:// on tlsPort(), its certificate
  // for localhost and 127.0.0.1 signed by that CA.
  Status start(const std::string& ldif, const TestCa* ca = nullptr);
  // SIGKILL, as a server that went away; start() again (same entries and
  // ports) brings it back.
  void stop();
  Status restart();

  std::string url() const { return "ldap://127.0.0.1:" + std::to_string(port_); }
  // 127.0.0.1, not localhost: libldap checks a certificate for "localhost"
  // against the machine's own name.
  std::string tlsUrl() const { return "ldaps://127.0.0.1:" + std::to_string(tlsPort_); }
  uint16_t port() const { return port_; }

  // ldapmodify -f with the rootdn's rights; the error holds its words.
  Status modify(const std::string& ldif) const;
  std::string log() const;

  // The entry of a person `uid` with `password` under ou=people, and of a
  // groupOfNames `cn` whose members are those uids, as LDIF.
  static std::string person(const std::string& uid, const std::string& password);
  static std::string group(const std::string& cn, const std::vector<std::string>& uids);
  static std::string personDn(const std::string& uid);

 private:
  std::filesystem::path root_;
  uint16_t port_ = 0, tlsPort_ = 0;
  bool tls_ = false;
  pid_t pid_ = -1;
};

}  // namespace ductus::test
