// A real OpenSSH server per test: /usr/sbin/sshd on 127.0.0.1 at a port of
// its own (ports.h), with a throwaway ed25519 host key, a throwaway user
// (made with useradd, removed by the destructor) who may sign in with a
// key pair of the test's or a password, and SFTP only, into folder().
// Needs root: sshd switches to the user, and a password is checked
// against /etc/shadow.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <string>

#include "common/result.h"
#include "common/sftp/settings.h"

namespace ductus::test {

class SshdServer {
 public:
  SshdServer() = default;
  // Stops the server (and every session it has open), removes the user and
  // the folders.
  ~SshdServer();
  SshdServer(const SshdServer&) = delete;
  SshdServer& operator=(const SshdServer&) = delete;

  // Makes the user, the keys and the configuration, and starts sshd; ready
  // when it accepts a connection. The error says what failed (log() has
  // sshd's own words).
  Status start();
  // Ends sshd and every session it has open (SIGKILL), as a server that
  // went away; start() again opens the same port with the same keys and
  // files.
  void stop();
  void kill();
  Status restart() {
    stop();
    return start();
  }

  std::string host() const { return "127.0.0.1"; }
  uint16_t port() const { return port_; }
  const std::string& user() const { return user_; }
  const std::string& password() const { return password_; }
  std::filesystem::path privateKeyFile() const { return root_ / "user_key"; }
  std::string privateKeyPem() const;
  // The server's key as host_key takes it: "ssh-ed25519 AAAA...".
  const std::string& hostKeyLine() const { return hostKeyLine_; }
  // What the user sees over SFTP as its start folder: relative paths land
  // here. Owned by the user.
  const std::filesystem::path& folder() const { return files_; }
  // Makes folder()/relative and any missing parents, owned by the user so
  // that it may write there (the test runs as root).
  std::filesystem::path makeFolder(const std::string& relative) const;
  // sshd's log so far (LogLevel VERBOSE): sign-ins, refusals.
  std::string log() const;

  // The client's settings for this server, the host key pinned: signing in
  // with the key, or with the password only.
  sftp::ServerSettings keySettings() const;
  sftp::ServerSettings passwordSettings() const;

 private:
  Status prepare();
  std::filesystem::path root_;   // configuration, keys, the log
  std::filesystem::path files_;  // root_/files: the user's SFTP folder
  std::string user_, password_, hostKeyLine_;
  uint16_t port_ = 0;
  pid_t pid_ = -1;
  bool userMade_ = false;
  uid_t uid_ = 0;
  gid_t gid_ = 0;
};

}  // namespace ductus::test
