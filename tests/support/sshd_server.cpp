#include "tests/support/sshd_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "tests/support/ports.h"
#include "tests/support/processes.h"
#include "tests/support/test_env.h"

namespace ductus::test {
namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

Status run(const std::vector<std::string>& argv) {
  auto r = runSplit(argv);
  if (r.code == 0) return {};
  std::string cmd;
  for (const auto& a : argv) cmd += (cmd.empty() ? "" : " ") + a;
  return Error{cmd + " failed (" + std::to_string(r.code) + "): " + r.err + r.out};
}

}  // namespace

SshdServer::~SshdServer() {
  kill();
  // useradd and userdel take a lock on /etc/passwd, so a test beside this
  // one can make userdel fail (exit 10), as can a session's process of the
  // user still ending (8; -f removes it anyway). A user left behind keeps
  // its name: a later test process with the same pid could not make it.
  for (int i = 0; userMade_ && i < 50; ++i) {
    if (runSplit({"userdel", "-f", user_}).code == 0) break;
    std::this_thread::sleep_for(100ms);
  }
  if (!root_.empty()) {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
}

Status SshdServer::prepare() {
  if (geteuid() != 0) return Error{"SshdServer needs root (it makes a user and runs sshd)"};
  char tmpl[] = "/tmp/ductus-sshd.XXXXXX";
  if (!mkdtemp(tmpl)) return Error::fromErrno("mkdtemp");
  root_ = tmpl;
  files_ = root_ / "files";
  fs::create_directories(files_);
  // sshd reads authorized_keys as the user.
  fs::permissions(root_, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                             fs::perms::others_read | fs::perms::others_exec);
  static std::atomic<int> counter{0};
  // The pid, a count, and the folder's random suffix (lower-cased: useradd
  // takes lower-case names): unique even beside a user that a killed test
  // process with the same pid left behind.
  std::string suffix = root_.extension().string().substr(1);  // mkdtemp's XXXXXX
  for (char& c : suffix) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  user_ = "dt" + std::to_string(getpid()) + "x" + std::to_string(counter++) + "r" + suffix;
  password_ = "pw-" + user_ + "-Secret!";
  // useradd takes a lock on /etc/passwd; tests run side by side retry it.
  Status made = Error{"useradd never ran"};
  for (int i = 0; i < 50 && !made; ++i) {
    made = run({"useradd", "-M", "-d", files_.string(), "-s", "/usr/sbin/nologin", user_});
    if (!made) std::this_thread::sleep_for(100ms);
  }
  if (!made) return made;
  userMade_ = true;
  Status chpasswd = Error{"chpasswd never ran"};
  for (int i = 0; i < 50 && !chpasswd; ++i) {
    auto r = runSplit({"sh", "-c", "echo '" + user_ + ":" + password_ + "' | chpasswd"});
    chpasswd = r.code == 0 ? Status{} : Status{Error{"chpasswd: " + r.err}};
    if (!chpasswd) std::this_thread::sleep_for(100ms);
  }
  if (!chpasswd) return chpasswd;
  passwd* pw = getpwnam(user_.c_str());
  if (!pw) return Error{"getpwnam(" + user_ + ") found nothing after useradd"};
  uid_ = pw->pw_uid;
  gid_ = pw->pw_gid;
  if (::chown(files_.c_str(), uid_, gid_) != 0) return Error::fromErrno("chown " + files_.string());
  for (const char* key : {"host_key", "user_key"})
    if (auto st = run({"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "", "-f",
                       (root_ / key).string()});
        !st)
      return st;
  fs::copy_file(root_ / "user_key.pub", root_ / "authorized_keys");
  fs::permissions(root_ / "authorized_keys", fs::perms::owner_read | fs::perms::owner_write |
                                                 fs::perms::group_read | fs::perms::others_read);
  std::string pub = fileText(root_ / "host_key.pub");
  std::istringstream words(pub);
  std::string type, blob;
  words >> type >> blob;
  hostKeyLine_ = type + " " + blob;
  port_ = freePort();
  std::ofstream cfg(root_ / "sshd_config");
  cfg << "Port " << port_ << "\n"
      << "ListenAddress 127.0.0.1\n"
      << "HostKey " << (root_ / "host_key").string() << "\n"
      << "PidFile " << (root_ / "sshd.pid").string() << "\n"
      << "UsePAM no\n"
      << "StrictModes no\n"
      << "PubkeyAuthentication yes\n"
      << "PasswordAuthentication yes\n"
      << "KbdInteractiveAuthentication no\n"
      << "AuthorizedKeysFile " << (root_ / "authorized_keys").string() << "\n"
      << "AllowUsers " << user_ << "\n"
      << "MaxStartups 100\n"
      << "MaxSessions 100\n"
      << "LogLevel VERBOSE\n"
      << "Subsystem sftp internal-sftp\n"
      << "ForceCommand internal-sftp -d " << files_.string() << "\n";
  return cfg ? Status{} : Status{Error{"writing sshd_config"}};
}

Status SshdServer::start() {
  if (root_.empty())
    if (auto st = prepare(); !st) return st;
  std::error_code ec;
  fs::create_directories("/run/sshd", ec);  // sshd's privilege separation folder
  pid_ = fork();
  if (pid_ < 0) return Error::fromErrno("fork");
  if (pid_ == 0) {
    int devnull = ::open("/dev/null", O_RDWR);
    dup2(devnull, 0);
    execl("/usr/sbin/sshd", "/usr/sbin/sshd", "-D", "-f", (root_ / "sshd_config").c_str(), "-E",
          (root_ / "sshd.log").c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  for (auto until = std::chrono::steady_clock::now() + 10s;
       std::chrono::steady_clock::now() < until;) {
    if (accepts(port_)) return {};
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return Error{"sshd exited at start: " + log()};
    }
    std::this_thread::sleep_for(20ms);
  }
  return Error{"sshd did not accept on 127.0.0.1:" + std::to_string(port_) + " in 10 s: " + log()};
}

void SshdServer::stop() { kill(); }

void SshdServer::kill() {
  if (pid_ <= 0) return;
  // The listener stopped first, so it forks no more sessions while they are
  // found (once it is gone, they would belong to init); then all of them.
  ::kill(pid_, SIGSTOP);
  for (pid_t child : descendantsOf(pid_)) ::kill(child, SIGKILL);
  ::kill(pid_, SIGKILL);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
  // Until the port is free again, start() would find the old listener.
  for (int i = 0; i < 100 && accepts(port_); ++i) std::this_thread::sleep_for(10ms);
}

fs::path SshdServer::makeFolder(const std::string& relative) const {
  fs::path p = files_;
  for (const auto& part : fs::path(relative)) {
    if (part.empty()) continue;
    p /= part;
    if (fs::exists(p)) continue;
    fs::create_directory(p);
    if (::chown(p.c_str(), uid_, gid_) != 0)
      ADD_FAILURE() << "chown " << p << ": " << std::strerror(errno);
  }
  return p;
}

std::string SshdServer::privateKeyPem() const { return fileText(privateKeyFile()); }

std::string SshdServer::log() const { return root_.empty() ? "" : fileText(root_ / "sshd.log"); }

sftp::ServerSettings SshdServer::keySettings() const {
  sftp::ServerSettings s;
  s.host = host();
  s.port = port_;
  s.user = user_;
  s.privateKeyFile = privateKeyFile();
  s.hostKeys = {hostKeyLine_};
  s.at = "the test's sshd";
  return s;
}

sftp::ServerSettings SshdServer::passwordSettings() const {
  sftp::ServerSettings s = keySettings();
  s.privateKeyFile.clear();
  s.password = password_;
  return s;
}

}  // namespace ductus::test
