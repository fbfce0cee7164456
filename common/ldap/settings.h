// A directory as ductus.yaml's auth: { ldap: ... } writes it: where it is,
// how the engine binds to look people up, where the people and the groups
// are, and which groups give which role. Plain data, filled by common/config
// (which checks it with file and line) and used by api/auth's directory
// client and its refresh round. Never logged whole: the bind password is a
// secret.
#pragma once

#include <chrono>
#include <map>
#include <string>

#include "common/tls/settings.h"

namespace ductus::ldap {

struct DirectorySettings {
  // ldap://host[:port] or ldaps://host[:port]; start_tls: true upgrades an
  // ldap:// connection before anything is sent. tls.ca: a certificates:
  // entry the server is verified against (else the system's roots); the
  // server's name is always checked.
  std::string url;
  bool startTls = false;
  tls::ConnectTls tls;
  // The service account the engine binds as to find a user's entry and
  // groups (and in the refresh round). Empty dn: an anonymous search.
  std::string bindDn;
  std::string bindPassword;
  // users: { base, filter }: {name} in the filter is the name signed in
  // with, escaped (RFC 4515) before it is put there.
  std::string usersBase;
  std::string usersFilter = "(uid={name})";
  // groups: { base, filter, roles }: the groups whose filter matches the
  // user ({dn}: the user's entry, {name}: the name; both escaped). A group
  // is named by its cn (or its whole DN) in roles:, compared without case.
  std::string groupsBase;
  std::string groupsFilter = "(|(member={dn})(uniqueMember={dn})(memberUid={name}))";
  std::map<std::string, std::string> roles;  // group -> viewer | operator | admin
  // How often the directory users' groups are read again (their sessions
  // and tokens end when they left or lost every mapped group), and the
  // bound on any one exchange with the server.
  std::chrono::milliseconds refresh = std::chrono::minutes(15);
  std::chrono::milliseconds timeout = std::chrono::seconds(10);
  std::string at;  // "ductus.yaml:12", for messages

  bool enabled() const { return !url.empty(); }
};

}  // namespace ductus::ldap
