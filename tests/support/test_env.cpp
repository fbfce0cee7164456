#include "tests/support/test_env.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

extern char** environ;

namespace ductus::test {
namespace {

// The engine reads these from its environment. A test that sets one does so
// on purpose; one left over from the shell that runs the tests (a
// developer's DUCTUS_DATABASE_URL, say) would change what the test sees, or
// make a `ductus check` under test wait on a database that is not ours. Run
// before main() in every test binary that links the support library.
const bool kEnvironmentCleared = [] {
  for (const char* name : {"DUCTUS_DATABASE_URL", "DUCTUS_SECRETS_KEY", "DUCTUS_ENV",
                           "DUCTUS_LOG_LEVEL", "DUCTUS_LOG_FORMAT"})
    unsetenv(name);
  std::vector<std::string> publicNames;
  for (char** e = environ; e && *e; ++e)
    if (std::string_view(*e).starts_with("DUCTUS_PUBLIC_"))
      publicNames.emplace_back(*e, std::string_view(*e).find('='));
  for (auto& n : publicNames) unsetenv(n.c_str());
  return true;
}();

}  // namespace

std::string databaseUrl() {
  const char* url = std::getenv("DUCTUS_TEST_DATABASE_URL");
  if (!url || !*url) {
    ADD_FAILURE() << "DUCTUS_TEST_DATABASE_URL is not set: run the tests with scripts/test, "
                     "which starts a throwaway PostgreSQL cluster";
    return "";
  }
  return url;
}

ChildOutput runChild(const std::vector<std::string>& argv) {
  ChildOutput r;
  int fds[2];
  if (pipe(fds) != 0) return r;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_addclose(&fa, fds[0]);
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid;
  int rc = posix_spawn(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    return r;
  }
  char buf[4096];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) r.out.append(buf, n);
  close(fds[0]);
  waitpid(pid, &r.exitStatus, 0);
  return r;
}

std::string fileText(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  // libstdc++ throws from a failed read(2) whatever the stream's mask: a
  // /proc file of a process that just ended fails with ESRCH.
  try {
    return std::string(std::istreambuf_iterator<char>(in), {});
  } catch (const std::exception&) {
    return "";
  }
}

SplitOutput runSplit(const std::vector<std::string>& argv) {
  SplitOutput r;
  int out[2], err[2];
  if (pipe(out) != 0) return r;
  if (pipe(err) != 0) {
    close(out[0]);
    close(out[1]);
    return r;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err[1], 2);
  for (int fd : {out[0], out[1], err[0], err[1]}) posix_spawn_file_actions_addclose(&fa, fd);
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid;
  int rc = posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  close(out[1]);
  close(err[1]);
  if (rc == 0) {
    // Both at once: a child that fills one pipe while we wait on the
    // other would never finish.
    pollfd p[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
    std::string* into[2] = {&r.out, &r.err};
    int open = 2;
    while (open > 0 && poll(p, 2, -1) > 0) {
      for (int i = 0; i < 2; ++i) {
        if (p[i].fd < 0 || !(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        char buf[4096];
        ssize_t n = read(p[i].fd, buf, sizeof buf);
        if (n > 0) {
          into[i]->append(buf, static_cast<size_t>(n));
        } else {
          p[i].fd = -1;
          --open;
        }
      }
    }
    int status = 0;
    waitpid(pid, &status, 0);
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  close(out[0]);
  close(err[0]);
  return r;
}

}  // namespace ductus::test
