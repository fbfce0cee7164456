// EngineProcess: a real `ductus run` on a project folder the test writes,
// as a child process whose log goes to a file. Tests kill it with SIGKILL
// mid-traffic and start it again on the same database.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "tests/support/ports.h"  // freePort(), for the project's listen ports

namespace ductus::test {

struct MllpProject;  // tests/support/mllp_project.h

// A temporary project folder: files given as path -> text.
class TempProject {
 public:
  explicit TempProject(const std::map<std::string, std::string>& files);
  // The one-MLLP-interface project most end-to-end tests run.
  explicit TempProject(const MllpProject& project);
  ~TempProject();
  const std::filesystem::path& root() const { return root_; }

 private:
  std::filesystem::path root_;
};

class EngineProcess {
 public:
  EngineProcess(std::filesystem::path project, std::string databaseUrl);
  ~EngineProcess();  // SIGKILLs a child still running

  // Starts `ductus run` and waits for its "started:" line; false (with the
  // log in the failure) if it exits or takes longer than the timeout.
  bool start(std::chrono::seconds timeout = std::chrono::seconds(60));
  // Only starts the child (for a start that is meant to fail); false if it
  // could not be started.
  bool spawn();
  void kill9();
  // SIGTERM and wait; the exit status.
  int terminate(std::chrono::seconds timeout = std::chrono::seconds(40));
  // Options after `run PROJECT --database URL` from the next start on
  // (e.g. {"--stop-timeout", "1s"}).
  void setExtraArgs(std::vector<std::string> args) { extraArgs_ = std::move(args); }
  // Runs this ductus binary instead of the build's (a copy the test may
  // replace under the running engine).
  void setBinary(std::string path) { binary_ = std::move(path); }
  // Variables added to (or replacing those of) the child's environment from
  // the next start on (NOTIFY_SOCKET).
  void setEnvironment(std::map<std::string, std::string> env) { env_ = std::move(env); }
  // Hands these sockets to the next start as systemd does: as fds 3, 4, ...
  // with LISTEN_FDS, LISTEN_FDNAMES (names joined by ':') and LISTEN_PID the
  // child's pid. The test keeps its own descriptors.
  void setListenFds(std::vector<int> fds, std::string names) {
    listenFds_ = std::move(fds);
    listenFdNames_ = std::move(names);
  }
  // Sends sig without waiting.
  void signal(int sig);
  // Waits for the child to exit; its waitpid status, or -1 (still running,
  // left running) when the time is up.
  int wait(std::chrono::seconds timeout);
  std::string log() const;
  pid_t pid() const { return pid_; }

 private:
  std::filesystem::path project_;
  std::string url_;
  std::filesystem::path logFile_;
  pid_t pid_ = -1;
  int runs_ = 0;
  std::vector<std::string> extraArgs_;
  std::string binary_;
  std::map<std::string, std::string> env_;
  std::vector<int> listenFds_;
  std::string listenFdNames_;
  size_t logBefore_ = 0;
};

}  // namespace ductus::test
