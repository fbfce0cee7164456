#include "tests/support/pg_cluster.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <pwd.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "tests/support/exit_status.h"

extern char** environ;

namespace ductus::test {

PgCluster::PgCluster() {
  // Short: the Unix socket lives inside it (108-byte path limit).
  char tmpl[] = "/tmp/dpg.XXXXXX";
  if (mkdtemp(tmpl)) dir_ = tmpl;
  else ADD_FAILURE() << "mkdtemp failed";
}

PgCluster::PgCluster(std::filesystem::path dir) : dir_(std::move(dir)) {}

PgCluster::~PgCluster() {
  if (!dir_.empty()) pgsh({"stop", dir_.string()});  // stops and removes the folder
}

// pg.sh's output goes to a file, not a pipe: the postmaster it starts
// inherits the script's descriptors and would hold a pipe open for its
// whole life, so reading the pipe to its end would wait for the server.
bool PgCluster::pgsh(const std::vector<std::string>& args, std::string* out) {
  std::vector<std::string> argv{DUCTUS_SOURCE_DIR "/scripts/pg.sh"};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> cargs;
  for (auto& a : argv) cargs.push_back(a.data());
  cargs.push_back(nullptr);
  char tmpl[] = "/tmp/dpg-out.XXXXXX";
  int fd = mkstemp(tmpl);
  if (fd < 0) return false;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fd, 1);
  posix_spawn_file_actions_addclose(&fa, fd);
  pid_t pid;
  int rc = posix_spawn(&pid, cargs[0], &fa, nullptr, cargs.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  close(fd);
  int st = -1;
  if (rc == 0) waitpid(pid, &st, 0);
  if (out) {
    std::ifstream in(tmpl);
    std::stringstream ss;
    ss << in.rdbuf();
    *out = ss.str();
  }
  unlink(tmpl);
  return rc == 0 && exitedWith(st, 0);
}

bool PgCluster::start(uint16_t tcpPort) {
  std::string out;
  std::vector<std::string> args{"start", dir_.string()};
  if (tcpPort) args.insert(args.end(), {"--tcp", std::to_string(tcpPort)});
  if (dir_.empty() || !pgsh(args, &out)) {
    ADD_FAILURE() << "scripts/pg.sh start " << dir_ << " failed: " << out;
    return false;
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  url_ = out;
  return true;
}

bool PgCluster::startStandbyOf(const PgCluster& primary, const std::string& name,
                               uint16_t tcpPort) {
  std::string out;
  std::vector<std::string> args{"standby", dir_.string(), primary.dir().string(), name};
  if (tcpPort) args.insert(args.end(), {"--tcp", std::to_string(tcpPort)});
  if (dir_.empty() || !pgsh(args, &out)) {
    ADD_FAILURE() << "scripts/pg.sh standby " << dir_ << " " << primary.dir() << " failed: " << out;
    return false;
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  url_ = out;
  return true;
}

bool PgCluster::setSynchronousStandbys(const std::string& names) {
  // ALTER SYSTEM takes no parameter: the names are the test's own.
  value("ALTER SYSTEM SET synchronous_standby_names = '" + names + "'");
  value("SELECT pg_reload_conf()");
  for (int i = 0; i < 500; ++i) {
    if (value("SHOW synchronous_standby_names") == names) return true;
    usleep(20'000);
  }
  ADD_FAILURE() << "synchronous_standby_names is not '" << names << "' after a reload";
  return false;
}

bool PgCluster::waitForStandby(const std::string& name, const std::string& syncState,
                               std::chrono::seconds timeout) {
  auto until = std::chrono::steady_clock::now() + timeout;
  std::string seen;
  do {
    seen = value(
        "SELECT state || ' ' || sync_state FROM pg_stat_replication WHERE application_name = $1",
        {name});
    if (seen == "streaming " + syncState) return true;
    usleep(50'000);
  } while (std::chrono::steady_clock::now() < until);
  ADD_FAILURE() << "standby " << name << " is not streaming " << syncState
                << " (pg_stat_replication: '" << seen << "')";
  return false;
}

bool PgCluster::promote() {
  if (!pgsh({"promote", dir_.string()})) {
    ADD_FAILURE() << "scripts/pg.sh promote " << dir_ << " failed";
    return false;
  }
  return true;
}

bool PgCluster::serveTls(const std::filesystem::path& chain, const std::filesystem::path& key,
                         uint16_t tcpPort) {
  namespace fs = std::filesystem;
  fs::path data = dir_ / "data";
  std::error_code ec;
  fs::copy_file(chain, data / "server.crt", fs::copy_options::overwrite_existing, ec);
  if (!ec) fs::copy_file(key, data / "server.key", fs::copy_options::overwrite_existing, ec);
  if (ec) {
    ADD_FAILURE() << "copying the server's pair into " << data << ": " << ec.message();
    return false;
  }
  // The server runs as postgres when we are root (pg.sh) and refuses a
  // key others may read.
  if (getuid() == 0)
    if (passwd* pg = getpwnam("postgres"))
      for (const auto& f : {data / "server.crt", data / "server.key"})
        if (chown(f.c_str(), pg->pw_uid, pg->pw_gid) != 0) ADD_FAILURE() << "chown " << f;
  fs::permissions(data / "server.key", fs::perms::owner_read | fs::perms::owner_write);
  value("ALTER SYSTEM SET ssl = on");
  value("SELECT pg_reload_conf()");
  std::string tcp = "host=127.0.0.1 port=" + std::to_string(tcpPort) +
                    " user=postgres dbname=postgres sslmode=require";
  for (int i = 0; i < 100; ++i) {
    PGconn* c = PQconnectdb(tcp.c_str());
    bool up = PQstatus(c) == CONNECTION_OK;
    PQfinish(c);
    if (up) return true;
    usleep(50'000);
  }
  ADD_FAILURE() << "the cluster in " << dir_ << " does not take TLS on port " << tcpPort;
  return false;
}

bool PgCluster::stop() {
  if (!pgsh({"stop", dir_.string(), "--keep"})) {
    ADD_FAILURE() << "scripts/pg.sh stop " << dir_ << " --keep failed";
    return false;
  }
  return true;
}

bool PgCluster::crash(const std::string& how) {
  if (!pgsh({"crash", dir_.string(), how})) {
    ADD_FAILURE() << "scripts/pg.sh crash " << dir_ << " " << how << " failed";
    return false;
  }
  return true;
}

std::vector<std::string> PgCluster::column(const std::string& sql,
                                           const std::vector<std::string>& params) {
  std::vector<std::string> out;
  PGconn* c = PQconnectdb(url_.c_str());
  if (PQstatus(c) != CONNECTION_OK) {
    ADD_FAILURE() << "connecting to " << url_ << ": " << PQerrorMessage(c);
    PQfinish(c);
    return out;
  }
  std::vector<const char*> values;
  for (auto& p : params) values.push_back(p.c_str());
  PGresult* r = PQexecParams(c, sql.c_str(), static_cast<int>(values.size()), nullptr,
                             values.data(), nullptr, nullptr, 0);
  auto st = PQresultStatus(r);
  if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK) {
    ADD_FAILURE() << sql << ": " << PQerrorMessage(c);
  } else {
    for (int i = 0; i < PQntuples(r); ++i)
      out.emplace_back(PQgetvalue(r, i, 0), PQgetlength(r, i, 0));
  }
  PQclear(r);
  PQfinish(c);
  return out;
}

std::string PgCluster::value(const std::string& sql, const std::vector<std::string>& params) {
  auto c = column(sql, params);
  return c.empty() ? "" : c[0];
}

}  // namespace ductus::test
