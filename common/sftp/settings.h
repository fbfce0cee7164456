// An SFTP server as a project writes it: a source's or a destination's
// sftp: { host, port, user, password, private_key, host_key | known_hosts }.
// Plain data, filled by common/config (which checks it with file and line)
// and used by common/sftp's client. Written once here so the loader and the
// client cannot disagree on a field. Never logged whole: the password and
// the key are secrets.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace ductus::sftp {

struct ServerSettings {
  std::string host;  // a name or an address; resolved at each connect
  uint16_t port = 22;
  std::string user;
  // Either or both: the client offers the key first, then the password.
  std::string password;  // after substitution (usually ${secret:...})
  // private_key: a file (resolved against the project folder, read at each
  // connect so a replaced key is used without a restart) or PEM text given
  // inline (usually ${secret:...}). At most one of the two is set.
  std::filesystem::path privateKeyFile;
  std::string privateKeyPem;
  // The server's key, pinned: host_key's "ssh-ed25519 AAAA..." entries
  // (type and base64 blob, as in a known_hosts line without the host), or
  // known_hosts: a file in OpenSSH's format, its entries for host:port.
  // Exactly one of the two is set; a server whose key matches none of them
  // is refused before the user name or any credential is sent.
  std::vector<std::string> hostKeys;
  std::filesystem::path knownHostsFile;
  // Where the settings are written ("interfaces/lab/interface.yaml:7"), for
  // messages.
  std::string at;
  // Bounds: opening a session (DNS, TCP, key exchange, sign-in), and any one
  // SFTP request after that.
  std::chrono::milliseconds connectTimeout{15000};
  std::chrono::milliseconds requestTimeout{30000};

  // "ductus@lab-gw.hospital.org:22": how messages name the server.
  std::string describe() const { return user + "@" + host + ":" + std::to_string(port); }
};

}  // namespace ductus::sftp
