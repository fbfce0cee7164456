// The keys a project pins for an SFTP server, and whether the key a server
// showed is one of them. One reading of OpenSSH's known_hosts format, for
// the checks `ductus validate` runs (common/config/checks.cpp) and for the
// client that refuses an unpinned key (common/sftp/client.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ductus::sftp {

// A known_hosts file is a few kilobytes; a wrong path to something big is
// refused rather than read.
constexpr std::uintmax_t kMaxKnownHostsBytes = 4u << 20;

// How known_hosts names a server: "host" for port 22, "[host]:port"
// otherwise, as ssh and ssh-keyscan write them.
std::string knownHostsName(const std::string& host, uint16_t port);

// The keys ("ssh-ed25519 AAAA...": type and base64 blob) that a
// known_hosts text holds for host:port. OpenSSH's host field rules:
// comma-separated patterns with * and ?, "!" to exclude, or a hashed
// "|1|salt|hash" as ssh-keyscan -H writes. Lines with a marker
// (@cert-authority, @revoked) pin no key and are left out; comments and
// blank lines too.
std::vector<std::string> knownHostKeys(std::string_view text, const std::string& host,
                                       uint16_t port);

// Whether the server's key (its type name, "ssh-ed25519", and its raw
// blob as the key exchange gave it) is one of `pinned`, each "type base64"
// (a trailing comment is ignored).
bool pinnedKeyMatches(const std::vector<std::string>& pinned, std::string_view type,
                      std::string_view blob);

// "SHA256:..." as ssh-keygen -l prints a key's fingerprint: for messages
// that say which key a server showed.
std::string fingerprint(std::string_view blob);

// The key types that `pinned` names, in order, without repeats
// ({"ssh-ed25519", "ecdsa-sha2-nistp256"}): what a client asks the server
// for, so the server shows the key that was pinned.
std::vector<std::string> pinnedKeyTypes(const std::vector<std::string>& pinned);

}  // namespace ductus::sftp
