#include "supervisor/cli/dev_postgres.h"

#include <fcntl.h>
#include <pwd.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <vector>

#include "common/log.h"

extern char** environ;

namespace ductus::supervisor {
namespace fs = std::filesystem;
namespace {

fs::path pgBin() {
  if (const char* e = std::getenv("DUCTUS_PGBIN"); e && *e) return e;
  return "/usr/lib/postgresql/15/bin";
}

// Runs a PostgreSQL tool, as the postgres user when we are root, with its
// output going to logFile. Returns its exit status.
Status runTool(const std::vector<std::string>& argv, const fs::path& logFile) {
  std::vector<std::string> full;
  if (geteuid() == 0) full = {"/usr/sbin/runuser", "-u", "postgres", "--"};
  full.insert(full.end(), argv.begin(), argv.end());
  std::vector<char*> args;
  for (auto& a : full) args.push_back(a.data());
  args.push_back(nullptr);

  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, logFile.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  pid_t pid;
  int rc = posix_spawn(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return Error::fromErrno("starting " + argv[0], rc);
  int st = 0;
  waitpid(pid, &st, 0);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
    return Error{argv[0] + " failed (see " + logFile.string() + ")"};
  return {};
}

Status chownToPostgres(const fs::path& p) {
  if (geteuid() != 0) return {};
  passwd* pw = getpwnam("postgres");
  if (!pw) return Error{"no postgres OS user: run scripts/install-deps.sh as root"};
  // lchown: the folder was checked to be no link, and a link is never followed.
  if (lchown(p.c_str(), pw->pw_uid, pw->pw_gid) != 0)
    return Error::fromErrno("chown " + p.string());
  return {};
}

// The state folder lives in a world-writable place (/var/tmp) by default,
// and `ductus dev` may run as root, which then chowns it to postgres. A
// folder another local user prepared there (a link to /etc, say) must be
// refused, not followed: the folder and the one holding it must be real
// folders, the holder writable by nobody but their owner (or sticky and
// root's, like /var/tmp), and each owned by us (the leaf may be
// postgres's: a previous run chowned it).
Status checkStateFolder(const fs::path& dir, bool leaf) {
  uid_t me = geteuid();
  passwd* pg = getpwnam("postgres");
  auto check = [&](const fs::path& p, bool leaf) -> Status {
    struct stat st {};
    if (lstat(p.c_str(), &st) != 0) return Error::fromErrno("lstat " + p.string());
    if (S_ISLNK(st.st_mode))
      return Error{p.string() + " is a symbolic link; the dev state folder must be a real folder"};
    if (!S_ISDIR(st.st_mode)) return Error{p.string() + " is not a folder"};
    bool ours = st.st_uid == me || (leaf && pg && st.st_uid == pg->pw_uid);
    bool sharedSticky = !leaf && st.st_uid == 0 && (st.st_mode & S_ISVTX);
    if (!ours && !sharedSticky)
      return Error{p.string() + " belongs to uid " + std::to_string(st.st_uid) +
                   ", not to this user: refusing a folder someone else made (use --data-dir, "
                   "or remove it)"};
    if (!leaf && !sharedSticky && (st.st_mode & (S_IWGRP | S_IWOTH)))
      return Error{p.string() + " is writable by others: refusing to keep the dev cluster in it"};
    return {};
  };
  return check(dir, leaf);
}

}  // namespace

Result<DevPostgres> DevPostgres::start(const fs::path& dirIn, bool fresh) {
  std::error_code ec;
  fs::path dir = fs::absolute(dirIn, ec);
  if (dir.string().size() > 90)
    return Error{dir.string() + " is too long for a Unix socket path; use a shorter folder"};
  fs::path bin = pgBin();
  if (!fs::exists(bin / "initdb"))
    return Error{"no PostgreSQL 15 at " + bin.string() +
                 " (set DUCTUS_PGBIN, or run scripts/install-deps.sh as root)"};

  DevPostgres pg;
  pg.dir_ = dir;
  fs::path data = dir / "data";
  fs::path log = dir / "postgres.log";
  if (fresh && fs::exists(dir)) {
    runTool({(bin / "pg_ctl").string(), "-D", data.string(), "-m", "fast", "-w", "stop"},
            dir / "stop.log")
        .ok();
    fs::remove_all(dir, ec);
  }
  // The holder first, as a folder of ours (mkdir makes no link), then the
  // checks, then the state folder itself, never through a link.
  if (!fs::exists(dir.parent_path(), ec)) {
    fs::create_directories(dir.parent_path(), ec);
    if (ec) return Error{"cannot create " + dir.parent_path().string() + ": " + ec.message()};
    chmod(dir.parent_path().c_str(), 0755);
  }
  if (auto s = checkStateFolder(dir.parent_path(), false); !s) return s.error();
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    return Error::fromErrno("cannot create " + dir.string());
  if (auto s = checkStateFolder(dir, true); !s) return s.error();
  chmod(dir.c_str(), 0700);
  if (auto s = chownToPostgres(dir); !s) return s.error();

  if (!fs::exists(data / "PG_VERSION")) {
    spdlog::info("dev: creating a PostgreSQL cluster in {}", data.string());
    if (auto s = runTool({(bin / "initdb").string(), "-D", data.string(), "-U", "postgres",
                          "--auth=trust", "-E", "UTF8", "--locale=C.UTF-8"},
                         dir / "initdb.log");
        !s)
      return s.error();
  }
  std::string opts = "-c listen_addresses='' -c port=5432 -c unix_socket_directories='" +
                     dir.string() + "' -c fsync=on -c max_connections=200";
  // A server left running by a run that was killed is reused as it is.
  if (!runTool({(bin / "pg_ctl").string(), "-D", data.string(), "status"}, dir / "status.log")) {
    if (auto s = runTool({(bin / "pg_ctl").string(), "-D", data.string(), "-l", log.string(), "-w",
                          "-t", "60", "-o", opts, "start"},
                         dir / "pg_ctl.log");
        !s)
      return Error{s.error().message + "; the server log is " + log.string()};
  }
  pg.running_ = true;
  pg.url_ = "host=" + dir.string() + " port=5432 user=postgres dbname=postgres";
  return pg;
}

DevPostgres::DevPostgres(DevPostgres&& o) noexcept
    : dir_(std::move(o.dir_)), url_(std::move(o.url_)), running_(std::exchange(o.running_, false)) {}

DevPostgres::~DevPostgres() {
  if (!running_) return;
  fs::path bin = pgBin();
  runTool({(bin / "pg_ctl").string(), "-D", (dir_ / "data").string(), "-m", "fast", "-w", "stop"},
          dir_ / "pg_ctl.log")
      .ok();
}

}  // namespace ductus::supervisor
