#include "supervisor/cli/dev_admin.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "api/auth/accounts.h"
#include "api/auth/credentials.h"
#include "api/auth/password_hasher.h"
#include "common/fd.h"
#include "supervisor/cli/user_command.h"

namespace ductus::supervisor {
namespace fs = std::filesystem;

namespace {

constexpr const char* kFileName = "dev-admin.json";

Result<DevAdmin> readFile(const fs::path& file) {
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  auto j = nlohmann::json::parse(text.str(), nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.value("password", nlohmann::json()).is_string() ||
      !j.value("token", nlohmann::json()).is_string() || !j.value("user", nlohmann::json()).is_string())
    return Error{file.string() + ": not the file `ductus dev` wrote (user, password, token); "
                 "remove it, or start with --fresh"};
  return DevAdmin{j["user"].get<std::string>(), j["password"].get<std::string>(),
                  j["token"].get<std::string>()};
}

// Written whole to a temporary name, then renamed: a file cut short by a
// crash would lock the developer out of their own dev engine.
Status writeFile(const fs::path& file, const DevAdmin& a) {
  std::string text =
      nlohmann::json{{"user", a.user}, {"password", a.password}, {"token", a.token}}.dump(2) +
      "\n";
  fs::path tmp = file;
  tmp += ".tmp";
  Fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  if (!fd.valid()) return Error{tmp.string() + ": " + std::strerror(errno)};
  if (::write(fd.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size()))
    return Error{tmp.string() + ": " + std::strerror(errno)};
  fd.reset();
  std::error_code ec;
  fs::rename(tmp, file, ec);
  if (ec) return Error{file.string() + ": " + ec.message()};
  return {};
}

}  // namespace

Result<DevAdmin> ensureDevAdmin(const fs::path& dir, const std::string& databaseUrl) {
  fs::path file = dir / kFileName;
  if (fs::exists(file)) return readFile(file);
  DevAdmin admin;
  auto password = api::newPassword();
  if (!password) return password.error();
  admin.password = *password;
  auto hash = api::hashPasswordNow(admin.password);
  if (!hash) return hash.error();
  std::optional<Error> failed;
  AccountsArgs db;
  db.database = databaseUrl;
  int rc = withAccountsDatabase("ductus dev", db, [&](store::PgConnection& conn, auto finish) {
    auto who = cliActor();
    auto now = std::chrono::system_clock::now();
    api::NewUser u{admin.user, api::Role::Admin, api::kPayloads | api::kAudit, *hash, false};
    api::createUser(conn, u, who, now, [&, who, now, finish](Result<api::UserInfo> r) {
      if (!r) {
        failed = Error{r.error().kind == ErrorKind::Exists
                           ? "a user " + admin.user + " exists but " + file.string() +
                                 " is gone; start with --fresh, or make an account with "
                                 "`ductus user create`"
                           : "creating the dev admin: " + r.error().message};
        return finish(1);
      }
      api::NewToken t{"dev", api::Role::Admin, api::kPayloads | api::kAudit, admin.user};
      api::createToken(conn, t, who, now, [&, finish](Result<api::CreatedToken> r) {
        if (!r) {
          failed = Error{"creating the dev admin's token: " + r.error().message};
          return finish(1);
        }
        admin.token = r->token;
        finish(0);
      });
    });
  });
  if (failed) return *failed;
  if (rc != 0) return Error{"the dev database could not be prepared (see above)"};
  if (auto s = writeFile(file, admin); !s) return s.error();
  return admin;
}

}  // namespace ductus::supervisor
