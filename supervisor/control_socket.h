// ControlSocket: the engine's Unix socket for ductusctl (issue #21), one
// JSON object a line each way (ctl/protocol.h).
//
// Who may talk: the socket file is mode 0600 (the owner alone can
// connect) and each peer's uid, from SO_PEERCRED, must be the engine's or
// root's; anyone else hears one error line and is closed. Everything runs
// on the engine's loop and never blocks it: a line longer than
// kControlMaxLine or a connection past kControlMaxConnections is answered
// with an error and closed. A connection's requests are answered in order.
//
// Requests: `status` (the engine, its interfaces with pending counts per
// destination, its workers) and `interfaces`. The engine's state comes
// from the EngineView the REST API reads (api/engine_view.h), pending
// counts included (interfacesWithPending: a query to the store).
//
// `api` ({"request":"api","method":"POST","path":"/api/v1/...","body":{}})
// runs one REST API operation for ductusctl's actions (messages, show,
// resend, dismiss, pause, resume, restart, drain), through a Router of the
// engine's own that no network reaches: the same handlers, checks and
// audit rows as the API's, the caller local:<the peer's account> as an
// admin (api/auth/local_caller.h). The answer: {"ok": 2xx, "status",
// "body"}, with "error" and "code" from the API's error body otherwise.
//
// `handover` (supervisor/handover.h) is answered when the handover has
// ended: {"ok":true,"pid":NEW} once the new engine runs, else the reason.
#pragma once

#include <sys/types.h>
#include <uv.h>

#include <functional>
#include <map>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "common/uv_handle.h"

namespace ductus::api {
class EngineView;
class Router;
}

namespace ductus::supervisor {

class ControlSocket {
 public:
  // `view` must outlive the socket.
  ControlSocket(uv_loop_t* loop, api::EngineView& view);
  ~ControlSocket();  // closes every connection; removes the file if still ours
  ControlSocket(const ControlSocket&) = delete;
  ControlSocket& operator=(const ControlSocket&) = delete;

  // Creates the folder (0700) if missing, replaces a stale socket (one no
  // engine answers on), binds, makes the file 0600 before anyone can
  // connect, listens. An error when another engine answers at `path`.
  Status listen(const std::string& path);
  // The router `api` requests go to (LocalAuthenticator's); null: refused.
  // Must outlive the socket.
  void setApi(api::Router* router) { api_ = router; }
  const std::string& path() const { return path_; }
  // A handover (supervisor/handover.h): the new engine serves on the old
  // one's listening socket at `path` (owned from here); the old one, once
  // it has handed over, leaves the file to it.
  Status adopt(const std::string& path, int fd);
  int fd() const;
  void keepFile(bool keep) { keepFile_ = keep; }
  // `handover` requests go here; `answer` is called once the handover has
  // ended ({"ok":true,"pid":N} or an error). Null: refused.
  using HandoverRequest = std::function<void(std::function<void(nlohmann::json)> answer)>;
  void setHandover(HandoverRequest handover) { handover_ = std::move(handover); }

  struct Connection;  // one peer (control_socket.cpp)

 private:
  static void onConnection(uv_stream_t* server, int status);
  void accept();
  void handleLine(const std::shared_ptr<Connection>& c, const std::string& line);
  void answerStatus(const std::shared_ptr<Connection>& c, bool withEngine);
  void answerApi(const std::shared_ptr<Connection>& c, const nlohmann::json& request);
  void answerHandover(const std::shared_ptr<Connection>& c);
  Status serve(int fd, const std::string& path);
  void resume(const std::shared_ptr<Connection>& c);
  void drop(Connection* c);

  uv_loop_t* loop_;
  api::EngineView& view_;
  api::Router* api_ = nullptr;
  HandoverRequest handover_;
  std::string path_;
  dev_t dev_ = 0;  // the socket file's identity, to remove it only if still ours
  ino_t ino_ = 0;
  bool keepFile_ = false;  // the other engine of a handover serves on it
  UvHandle<uv_pipe_t> server_;
  std::map<Connection*, std::shared_ptr<Connection>> connections_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace ductus::supervisor
