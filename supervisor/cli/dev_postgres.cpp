#include "supervisor/cli/dev_postgres.h"

#include <fcntl.h>
#include <pwd.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <vector>

#include <spdlog/spdlog.h>

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
  if (chown(p.c_str(), pw->pw_uid, pw->pw_gid) != 0) return Error::fromErrno("chown " + p.string());
  return {};
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
  fs::create_directories(dir, ec);
  if (ec) return Error{"cannot create " + dir.string() + ": " + ec.message()};
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
