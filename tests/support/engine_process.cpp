#include "tests/support/engine_process.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <thread>

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

bool EngineProcess::start(std::chrono::seconds timeout) {
  ++runs_;
  {
    std::ofstream(logFile_, std::ios::app) << "==== run " << runs_ << "\n";
  }
  size_t before = log().size();
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, logFile_.c_str(), O_WRONLY | O_APPEND | O_CREAT, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  std::string project = project_.string();
  std::vector<const char*> args = {ductusBinary(), "run", project.c_str(), "--database",
                                   url_.c_str()};
  for (auto& a : extraArgs_) args.push_back(a.c_str());
  args.push_back(nullptr);
  int rc = posix_spawn(&pid_, args[0], &fa, nullptr, const_cast<char**>(args.data()), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    ADD_FAILURE() << "posix_spawn: " << rc;
    return false;
  }
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
