#include "tests/support/engine_process.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string_view>
#include <thread>

#include "tests/support/mllp_project.h"
#include "tests/support/test_env.h"

extern char** environ;

namespace ductus::test {
namespace fs = std::filesystem;

TempProject::TempProject(const std::map<std::string, std::string>& files) {
  char tmpl[] = "/tmp/ductus-project.XXXXXX";
  root_ = mkdtemp(tmpl);
  for (auto& [path, text] : files) {
    fs::path p = root_ / path;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << text;
  }
}

TempProject::TempProject(const MllpProject& project) : TempProject(project.files()) {}

TempProject::~TempProject() {
  std::error_code ec;
  fs::remove_all(root_, ec);
}

EngineProcess::EngineProcess(fs::path project, std::string databaseUrl)
    : project_(std::move(project)), url_(std::move(databaseUrl)) {
  logFile_ = project_ / "engine.log";
}

EngineProcess::~EngineProcess() {
  if (pid_ > 0) kill9();
}

std::string EngineProcess::log() const {
  std::ifstream in(logFile_);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

namespace {

// The environment with `env` laid over it and systemd's socket variables
// left out (the caller adds its own).
std::vector<std::string> childEnvironment(const std::map<std::string, std::string>& env) {
  std::vector<std::string> out;
  for (char** e = environ; *e; ++e) {
    std::string_view kv = *e;
    std::string key(kv.substr(0, kv.find('=')));
    if (env.count(key) || key.rfind("LISTEN_", 0) == 0) continue;
    out.emplace_back(kv);
  }
  for (auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

// fork + exec, as systemd starts a service with sockets: they become fds 3,
// 4, ... and LISTEN_PID names the child, which only the child knows; so
// its text is written after the fork, with async-signal-safe code only.
pid_t forkWithListenFds(const char* binary, const std::vector<const char*>& args,
                        std::vector<std::string> env, const std::vector<int>& fds,
                        const std::string& names, const char* logFile) {
  env.push_back("LISTEN_FDS=" + std::to_string(fds.size()));
  env.push_back("LISTEN_FDNAMES=" + names);
  env.push_back("LISTEN_PID=" + std::string(24, '\0'));
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  char* pidText = env.back().data() + std::strlen("LISTEN_PID=");
  int top = 3 + static_cast<int>(fds.size()) + 16;
  std::vector<int> high(fds.size());  // allocated before: the child may not
  pid_t pid = fork();
  if (pid != 0) return pid;
  int log = ::open(logFile, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (log < 0 || dup2(log, 1) < 0 || dup2(log, 2) < 0) _exit(127);
  // Out of the way first, so moving one into place can't overwrite another.
  for (size_t i = 0; i < fds.size(); ++i)
    if ((high[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, top)) < 0) _exit(127);
  for (size_t i = 0; i < fds.size(); ++i)
    if (dup2(high[i], 3 + static_cast<int>(i)) < 0) _exit(127);  // dup2 clears CLOEXEC
  char digits[24];
  int n = 0;
  for (pid_t p = getpid(); p > 0; p /= 10) digits[n++] = static_cast<char>('0' + p % 10);
  for (int i = 0; i < n; ++i) pidText[i] = digits[n - 1 - i];
  execve(binary, const_cast<char**>(args.data()), envp.data());
  _exit(127);
}

}  // namespace

bool EngineProcess::spawn() {
  ++runs_;
  {
    std::ofstream(logFile_, std::ios::app) << "==== run " << runs_ << "\n";
  }
  logBefore_ = log().size();
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, logFile_.c_str(), O_WRONLY | O_APPEND | O_CREAT, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  std::string project = project_.string();
  std::vector<const char*> args = {binary_.empty() ? ductusBinary() : binary_.c_str(), "run",
                                   project.c_str(), "--database",
                                   url_.c_str()};
  for (auto& a : extraArgs_) args.push_back(a.c_str());
  args.push_back(nullptr);
  // The engine's default control socket is $RUNTIME_DIRECTORY/control (as
  // under systemd): a folder of this project's, never the machine's
  // /run/ductus, where another engine on the same machine may be.
  auto withRuntimeDir = env_;
  if (!withRuntimeDir.count("RUNTIME_DIRECTORY")) {
    std::error_code ec;
    fs::create_directories(project_ / ".run", ec);
    withRuntimeDir["RUNTIME_DIRECTORY"] = (project_ / ".run").string();
  }
  std::vector<std::string> env = childEnvironment(withRuntimeDir);
  if (!listenFds_.empty()) {
    posix_spawn_file_actions_destroy(&fa);
    pid_ = forkWithListenFds(args[0], args, std::move(env), listenFds_, listenFdNames_,
                             logFile_.c_str());
    if (pid_ < 0) ADD_FAILURE() << "fork: " << std::strerror(errno);
    return pid_ > 0;
  }
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  int rc = posix_spawn(&pid_, args[0], &fa, nullptr, const_cast<char**>(args.data()), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    pid_ = -1;
    ADD_FAILURE() << "posix_spawn: " << rc;
    return false;
  }
  return true;
}

bool EngineProcess::start(std::chrono::seconds timeout) {
  if (!spawn()) return false;
  size_t before = logBefore_;
  auto until = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < until) {
    std::string l = log().substr(before);
    if (l.find("started:") != std::string::npos) return true;
    int st;
    if (waitpid(pid_, &st, WNOHANG) == pid_) {
      pid_ = -1;
      ADD_FAILURE() << "the engine exited during its start:\n" << l;
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ADD_FAILURE() << "the engine did not start within " << timeout.count() << " s:\n"
                << log().substr(before);
  return false;
}

void EngineProcess::kill9() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  int st;
  waitpid(pid_, &st, 0);
  pid_ = -1;
  // Its workers notice the closed socket and exit; give them a moment so a
  // restart does not race them for nothing.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
}

void EngineProcess::signal(int sig) {
  if (pid_ > 0) ::kill(pid_, sig);
}

int EngineProcess::wait(std::chrono::seconds timeout) {
  if (pid_ <= 0) return -1;
  auto until = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < until) {
    int st = -1;
    if (waitpid(pid_, &st, WNOHANG) == pid_) {
      pid_ = -1;
      return st;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return -1;
}

int EngineProcess::terminate(std::chrono::seconds timeout) {
  if (pid_ <= 0) return -1;
  ::kill(pid_, SIGTERM);
  auto until = std::chrono::steady_clock::now() + timeout;
  int st = -1;
  while (std::chrono::steady_clock::now() < until) {
    if (waitpid(pid_, &st, WNOHANG) == pid_) {
      pid_ = -1;
      return st;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  kill9();
  return -1;
}

}  // namespace ductus::test
