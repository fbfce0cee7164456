// Systemd: what `ductus run` says to systemd and what systemd handed it,
// spoken directly (sd_notify(3), sd_listen_fds(3)) so nothing links
// libsystemd for a few datagrams.
//
// Notifications go to $NOTIFY_SOCKET (a path, or "@name" in the abstract
// namespace): READY=1, STOPPING=1, STATUS=..., MAINPID=, and the listening
// sockets with FDSTORE=1 + FDNAME=, their descriptors attached (SCM_RIGHTS).
// With FileDescriptorStoreMax= in the unit, systemd keeps them while the
// engine restarts or after it crashed, the kernel goes on queueing the
// connections, and the next start finds them in LISTEN_FDS (from fd 3,
// named by LISTEN_FDNAMES) and listens on them instead of binding: no
// sender is refused. Without NOTIFY_SOCKET every call is a no-op.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/fd.h"
#include "common/result.h"

namespace ductus::supervisor {

class Systemd {
 public:
  // Reads NOTIFY_SOCKET, and LISTEN_FDS / LISTEN_FDNAMES when LISTEN_PID is
  // this process. The LISTEN_* variables are removed and the inherited
  // descriptors made close-on-exec, so workers inherit neither; call it
  // before the first child process starts.
  static std::unique_ptr<Systemd> fromEnvironment();
  // For tests: a notify socket address ("" = none) and inherited sockets.
  Systemd(std::string notifySocket, std::multimap<std::string, Fd> inherited);
  ~Systemd();
  Systemd(const Systemd&) = delete;
  Systemd& operator=(const Systemd&) = delete;

  // Whether there is a NOTIFY_SOCKET to speak to.
  bool notifying() const { return !notifySocket_.empty(); }

  // One datagram: "KEY=value" lines, the descriptors attached. An error
  // when the socket isn't there or refuses; nothing when not notifying.
  Status notify(std::string_view state, const std::vector<int>& fds = {});
  // notify() with a failure logged at warn, once per kind: a notification
  // that doesn't arrive must not stop the engine.
  void tell(std::string_view state, const std::vector<int>& fds = {});

  // The name a listening socket is stored under: "mllp-127.0.0.1-2575",
  // "http-__1-8080". systemd refuses ':' and control characters in names.
  static std::string socketName(std::string_view kind, std::string_view host, uint16_t port);

  // The inherited socket stored as `name`, now the caller's (it owns the
  // descriptor); -1 when there is none.
  int takeListener(const std::string& name);
  // Stores a listening socket (FDSTORE=1, FDNAME=name). systemd ignores a
  // descriptor it already holds, so storing the one adopted is harmless.
  void storeListener(const std::string& name, int fd);
  // Inherited sockets nobody took (a listener removed from the project):
  // closed, and removed from systemd's store. Their names.
  std::vector<std::string> dropUntaken();
  // Removes every socket inherited or stored from systemd's store
  // (FDSTOREREMOVE=1): after a failed start, so connections are refused
  // rather than queued for a process that isn't coming.
  void removeStored();
  // While the engine drains: the stored listening sockets are removed from
  // systemd's store (a drained engine may be stopped for good, and nobody
  // should queue for it), and stored again if the drain ends.
  void unstoreListeners();
  void restoreListeners();
  // A listener closed (a drain closes the MLLP ones): its descriptor is
  // gone, so restoreListeners() must not store the number again.
  void forgetListener(const std::string& name) { listeners_.erase(name); }

  // A handover's new engine (supervisor/handover.h): the listening sockets
  // the old engine passed, listened on as LISTEN_FDS ones are.
  void inherit(const std::string& name, Fd fd);
  // Quiet: systemd listens only to its main process (NotifyAccess=main),
  // which a handover's new engine is not until the old one says
  // MAINPID=; until then nothing is sent, a failed preparation removes
  // nothing, and the stores and removals are remembered. speak() sends
  // them and ends the quiet.
  void quiet() { quiet_ = true; }
  void speak();

 private:
  std::string notifySocket_;
  std::multimap<std::string, Fd> inherited_;
  std::set<std::string> names_;  // inherited or stored: what removeStored() removes
  std::set<std::string> taken_;  // inherited and listened on: dropUntaken() leaves them stored
  std::set<std::string> warned_;
  std::map<std::string, int> listeners_;  // stored by storeListener(), not owned
  bool quiet_ = false;
  std::vector<std::string> removals_;  // FDSTOREREMOVE said while quiet
};

}  // namespace ductus::supervisor
