#include "supervisor/cli/check_command.h"

#include <capnp/common.h>
#include <curl/curl.h>
#include <fcntl.h>
#include <libpq-fe.h>
#include <openssl/crypto.h>
#include <seccomp.h>
#include <spawn.h>
#include <spdlog/version.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uv.h>

#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "common/command_line.h"
#include "common/fd.h"
#include "common/uv_handle.h"
#include "common/version.h"
#include "schema/pg_connection.h"

extern char** environ;

namespace ductus::supervisor {
namespace {

// Runs `<self> worker --probe` and returns its stdout.
Result<std::string> runProbe() {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return Error::fromErrno("pipe2() for the worker probe");
  Fd readEnd(fds[0]), writeEnd(fds[1]);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, writeEnd.get(), 1);
  char self[] = "/proc/self/exe";
  char sub[] = "worker";
  char opt[] = "--probe";
  char* args[] = {self, sub, opt, nullptr};
  pid_t pid;
  int rc = posix_spawn(&pid, "/proc/self/exe", &fa, nullptr, args, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return Error::fromErrno("posix_spawn() of the worker probe", rc);
  writeEnd.reset();
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(readEnd.get(), buf, sizeof buf)) > 0) out.append(buf, n);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return Error{"worker probe failed (status " + std::to_string(status) + "): " + out};
  return out;
}

// How long `ductus check` waits for SELECT version() once connected (the
// connect itself is bounded by connect_timeout, 10 s unless the URL says).
constexpr uint64_t kQueryTimeoutMs = 10000;

Result<std::string> checkDatabase(const std::string& url) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  std::optional<Result<std::string>> answer;
  {
    // The loop runs until there is an answer, not until it has nothing left
    // to do: a connected PgConnection keeps watching its socket (to hear the
    // server hang up), so "nothing left" never comes; check used to wait
    // forever there with its answer in hand.
    store::PgConnection conn(&loop);
    auto timer = makeTimer(&loop, &answer);
    conn.connect(url, [&](Status s) {
      if (!s) {
        if (!answer) answer = Error{s.error().message};
        return;
      }
      uv_timer_start(
          timer.get(),
          [](uv_timer_t* t) {
            auto* out = static_cast<std::optional<Result<std::string>>*>(t->data);
            if (out && !*out)
              *out = Error{"postgres: connected, but no answer to SELECT version() within " +
                           std::to_string(kQueryTimeoutMs / 1000) + " s"};
          },
          kQueryTimeoutMs, 0);
      conn.query("SELECT version()", {}, [&](Result<store::PgResult> r) {
        if (answer) return;
        if (r)
          answer = std::string(r->text(0, 0));
        else
          answer = r.error();
      });
    });
    while (!answer && uv_run(&loop, UV_RUN_ONCE)) {
    }
  }
  uv_run(&loop, UV_RUN_DEFAULT);  // close callbacks: the connection's and the timer's
  uv_loop_close(&loop);
  if (!answer) return Error{"postgres: no answer"};
  return std::move(*answer);
}

int check(const std::string& db) {
  int failures = 0;
  std::printf("ductus %s\n", kVersionLine);
  std::printf("libuv        %s\n", uv_version_string());
  std::printf("libpq        %d\n", PQlibVersion());
  std::printf("capnproto    %d.%d.%d\n", CAPNP_VERSION_MAJOR, CAPNP_VERSION_MINOR,
              CAPNP_VERSION_MICRO);
  std::printf("openssl      %s\n", OpenSSL_version(OPENSSL_VERSION));
  std::printf("curl         %s\n", curl_version_info(CURLVERSION_NOW)->version);
  const scmp_version* sv = seccomp_version();
  std::printf("libseccomp   %u.%u.%u\n", sv->major, sv->minor, sv->micro);
  std::printf("spdlog       %d.%d.%d\n", SPDLOG_VER_MAJOR, SPDLOG_VER_MINOR, SPDLOG_VER_PATCH);

  auto probe = runProbe();
  if (probe) {
    std::printf("worker probe (confined V8):\n");
    std::string_view p = *probe;
    while (!p.empty()) {
      auto nl = p.find('\n');
      std::printf("  %.*s\n", static_cast<int>(nl == p.npos ? p.size() : nl), p.data());
      if (nl == p.npos) break;
      p.remove_prefix(nl + 1);
    }
    if (probe->find("socket: EPERM") == std::string::npos ||
        probe->find("open: EPERM") == std::string::npos) {
      std::printf("FAIL: the worker was not confined\n");
      ++failures;
    }
  } else {
    std::printf("FAIL worker probe: %s\n", probe.error().message.c_str());
    ++failures;
  }

  if (!db.empty()) {
    auto v = checkDatabase(db);
    if (v) std::printf("postgres     %s\n", v->c_str());
    else {
      // The client's errors already start with "postgres: ".
      std::string_view why = v.error().message;
      if (why.rfind("postgres: ", 0) == 0) why.remove_prefix(10);
      std::printf("FAIL postgres: %.*s\n", static_cast<int>(why.size()), why.data());
      ++failures;
    }
  } else {
    std::printf("postgres     not checked (no --database / DUCTUS_DATABASE_URL)\n");
  }
  std::printf(failures ? "check FAILED\n" : "check passed\n");
  return failures ? 1 : 0;
}

}  // namespace

void addCheckCommand(CLI::App& ductus, int& exitCode) {
  auto database = std::make_shared<std::string>();
  auto* cmd =
      ductus.add_subcommand("check", "check this installation (confined V8 worker, PostgreSQL)");
  cmd->add_option("--database", *database, "PostgreSQL connection string to check too")
      ->type_name("URL")
      ->envname("DUCTUS_DATABASE_URL");
  cmd->footer(
      "Starts a confined V8 worker and runs a script in it, and, with a database,\n"
      "asks PostgreSQL for its version through the engine's async client.");
  cmd->callback([database, &exitCode] { exitCode = check(*database); });
}

}  // namespace ductus::supervisor
