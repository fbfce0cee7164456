// Directory: asks an LDAP server (OpenLDAP, Active Directory) who a person
// is, whether their password is right, and which groups they are in.
//
// libldap's calls block, so each runs on a thread of the directory's own
// (at most kThreads, each ending after a minute without work), never on
// the loop; answers come back to the loop through a LoopMailbox, and the
// callers' callbacks are only ever touched there. Every exchange is bounded
// by the settings' timeout (connect, TLS, bind, search), so a directory
// that stops answering costs a sign-in its timeout, not the engine a thread.
// Errors of kind Unavailable mean the server can't be asked; Conflict, that
// it answered this one request with an error (a size limit, say).
//
// A sign-in is one connection: the service account binds (auth.ldap.bind),
// finds the person's entry with users.filter ({name} escaped, RFC 4515;
// exactly one entry), reads their groups with groups.filter, then binds as
// that entry with the password given. An empty password is refused before
// any bind: LDAP takes a simple bind without one as an anonymous bind that
// succeeds (RFC 4513 5.1.2).
#pragma once

#include <uv.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/route.h"
#include "common/ldap/settings.h"
#include "common/result.h"

namespace ductus::api {

struct DirectoryEntry {
  std::string dn;
  // The groups groups.filter found for the person (their cn, or their DN
  // when they have none), as the directory spells them.
  std::vector<std::string> groups;
  // The highest role of the groups that groups.roles names; none: the
  // person is in no mapped group and may not sign in.
  std::optional<Role> role;
};

// What lookUp found for one name: their entry, no entry any more (or two:
// not one person), or nothing certain (a search that failed for this name
// alone, e.g. more groups than a search may answer), which changes nothing.
struct DirectoryLookup {
  enum class Outcome { Found, Gone, Unknown };
  Outcome outcome = Outcome::Unknown;
  DirectoryEntry entry;  // Found
  std::string error;     // Unknown: why
};

// RFC 4515's escapes for a value put into a filter: * ( ) \ and NUL as \2a
// \28 \29 \5c \00, so a name can't widen or end the filter it goes into.
std::string escapeFilterValue(std::string_view value);
// `filter` with {name} and {dn} replaced by their escaped values.
std::string fillFilter(std::string_view filter, std::string_view name, std::string_view dn);
// The highest role `roles` (groups.roles, keys in lower case) gives any of
// the groups (each compared without case, by its cn or name, or by its DN).
// OpenID Connect's groups claim is read the same way (api/auth/oidc.h).
std::optional<Role> roleOfGroups(const std::map<std::string, std::string>& roles,
                                 const std::vector<std::string>& groupCns,
                                 const std::vector<std::string>& groupDns);

class Directory {
 public:
  static constexpr size_t kThreads = 4;      // exchanges with the server at once
  static constexpr size_t kMaxWaiting = 64;  // then Busy (503)

  // `caFile`: the PEM file tls.ca names (DatabaseTls::caFile), empty for
  // the system's roots.
  Directory(uv_loop_t* loop, ldap::DirectorySettings settings, std::filesystem::path caFile);
  // Answers no callback after it; a thread in an exchange ends by itself
  // within the timeout.
  ~Directory();
  Directory(const Directory&) = delete;
  Directory& operator=(const Directory&) = delete;

  // The person `name` signing in with `password`. Error kinds: Denied (no
  // entry, more than one, an empty password, or the password refused; the
  // message says which, for the audit row only), Unavailable (the server
  // unreachable or slower than the timeout, or the service bind refused),
  // Busy (kMaxWaiting exchanges waiting).
  void signIn(std::string name, std::string password,
              std::function<void(Result<DirectoryEntry>)> done);
  // Each name's entry and groups, with the service bind, on one connection,
  // in the names' order. Errors (the whole batch): Unavailable (the server
  // unreachable, slower than the timeout, or the service bind refused),
  // Busy. A destroyed Directory stops a batch between two names.
  void lookUp(std::vector<std::string> names,
              std::function<void(Result<std::vector<DirectoryLookup>>)> done);

  const ldap::DirectorySettings& settings() const;

 private:
  struct Shared;
  // Runs `work` on a directory thread; `done` with its result on the loop.
  void submit(std::function<std::shared_ptr<void>()> work,
              std::function<void(std::shared_ptr<void>)> done, std::function<void(Error)> refused);
  std::shared_ptr<Shared> shared_;
};

}  // namespace ductus::api
