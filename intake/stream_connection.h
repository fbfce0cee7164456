// StreamConnection: an accepted TCP connection of the MLLP listener or the
// HTTP server, everything but its protocol. Both answer one request at a
// time: once the protocol has a complete request (beginRequest) nothing more
// is parsed until it is answered (endRequest), so answers go out in order;
// bytes that arrive meanwhile wait, and past a limit reading stops so TCP
// holds the peer back. It also owns the ways a connection ends: the peer's
// half-close (what it sent is answered first), closing once idle when the
// listener stops, a shutdown that lets queued answers out, and a lingering
// read after an error answer.
//
// ConnectionSet holds a listener's connections until each has closed;
// AnswerSlot makes the first of a handler's answers the only one.
#pragma once

#include <uv.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>

namespace ductus::intake {

class StreamConnection;

// What every copy of a handler's answer callable (MllpAnswer, HttpRespond)
// shares: the connection the answer goes to, handed out once. Later calls,
// and calls after the connection has gone, get null. A protocol derives its
// answer's state from it; that state's destructor answers for a handler that
// dropped every copy unanswered, so the peer does not hang.
class AnswerSlot {
 public:
  AnswerSlot() = default;
  AnswerSlot(const AnswerSlot&) = delete;
  AnswerSlot& operator=(const AnswerSlot&) = delete;

  template <class Connection>
  Connection* take() {
    return static_cast<Connection*>(std::exchange(conn_, nullptr));
  }
  // Whether an answer has been given (or the connection is gone).
  bool answered() const { return conn_ == nullptr; }

 private:
  friend class StreamConnection;
  StreamConnection* conn_ = nullptr;
};

// The connections one listening socket accepted, until each has closed.
class ConnectionSet {
 public:
  ConnectionSet() = default;
  ConnectionSet(const ConnectionSet&) = delete;
  ConnectionSet& operator=(const ConnectionSet&) = delete;
  // Closes every connection at once; answers in flight go nowhere.
  ~ConnectionSet();

  // Accepts the connection waiting on `server` (status: what the listen
  // callback got) into a new Connection(args...), which owns itself from
  // here. Null when that fails, which is logged under `name`.
  template <class Connection, class... Args>
  Connection* accept(uv_stream_t* server, int status, std::string_view name, Args&&... args) {
    if (!statusOk(status, name)) return nullptr;
    auto* c = new Connection(std::forward<Args>(args)...);  // deleted in its close callback
    return admit(server, c, name) ? c : nullptr;
  }

  // Idle connections close now, busy ones once their answer is written;
  // onClosed runs when the last has closed (at once if there are none) and
  // may destroy this set.
  void closeAll(std::function<void()> onClosed);

  size_t size() const { return live_.size(); }

 private:
  friend class StreamConnection;
  static bool statusOk(int status, std::string_view name);
  bool admit(uv_stream_t* server, StreamConnection* c, std::string_view name);
  void closed(StreamConnection* c);
  void maybeClosed();

  std::unordered_set<StreamConnection*> live_;
  bool closing_ = false;
  std::function<void()> onClosed_;
};

class StreamConnection {
 public:
  StreamConnection(const StreamConnection&) = delete;
  StreamConnection& operator=(const StreamConnection&) = delete;

  // "127.0.0.1:53412"; "" if the peer's address could not be read.
  const std::string& peer() const { return peer_; }

 protected:
  enum class IoStep { StartRead, Read, Write };

  // pendingLimit: how many bytes may wait behind the request in flight
  // before reading stops; 0 stops it as soon as a request is complete.
  explicit StreamConnection(size_t pendingLimit);
  virtual ~StreamConnection() = default;

  // ---- the protocol's part ----

  // Parses bytes the peer sent; returns how many it used. It returns right
  // after calling beginRequest() or shutdownAndClose(); the rest is fed
  // again once the request is answered.
  virtual size_t feed(const char* p, size_t n) = 0;
  // Logs a failed read or write in the protocol's words; the connection is
  // closed right after.
  virtual void failed(IoStep step, int status) = 0;
  // The peer closed its side and everything it sent is answered; the
  // connection shuts down next.
  virtual void inputEnded() {}

  // ---- for the protocol ----

  // Whether the connection is still its listener's; false once the listener
  // is gone, which the protocol must check before reaching for it.
  bool attached() const { return set_ != nullptr; }
  // Whether the connection closes after the answer in flight (its listener
  // is closing).
  bool draining() const { return draining_; }

  // A complete request goes to the handler, whose answer holds `slot`.
  void beginRequest(const std::shared_ptr<AnswerSlot>& slot);
  // Writes the answer (to the request in flight, or one the protocol gives
  // itself from inside feed()) and goes on with what the peer sent next;
  // shuts down instead when !keepOpen or draining().
  void endRequest(std::string answer, bool keepOpen);
  // Queues bytes to the peer; dropped once the connection is closing or
  // shut down.
  void write(std::string bytes);
  // Closes once everything queued is written (uv_close would cancel it).
  // linger: until the peer closes, read and drop what it still sends (up to
  // a limit), because closing a socket with unread data makes the kernel
  // send RST, which can destroy the answer before the peer reads it.
  void shutdownAndClose(bool linger);

 private:
  friend class ConnectionSet;
  struct WriteReq;

  static void onClose(uv_handle_t* h);
  static void onAlloc(uv_handle_t* h, size_t, uv_buf_t* buf);
  static void onRead(uv_stream_t* s, ssize_t n, const uv_buf_t* buf);
  static void onWrite(uv_write_t* req, int status);
  static void onShutdown(uv_shutdown_t* req, int status);

  uv_stream_t* stream() { return reinterpret_cast<uv_stream_t*>(&tcp_); }
  void start();
  void closeWhenIdle();
  void closeNow();
  void startReading();
  void stopReading();
  void consume(const char* p, size_t n);
  size_t feedAll(const char* p, size_t n);
  void drainPending();
  void endOfInput();

  uv_tcp_t tcp_{};
  ConnectionSet* set_ = nullptr;  // null until accepted and once the set is gone
  const size_t pendingLimit_;
  std::unique_ptr<char[]> readBuf_;
  std::string peer_;
  std::string pending_;  // read behind the request in flight
  size_t lingered_ = 0;
  bool busy_ = false;     // a request is with the handler
  bool feeding_ = false;  // feed() is on the stack
  bool reading_ = false;
  bool eofSeen_ = false;  // the peer closed; close after answering what it sent
  bool closing_ = false;
  bool draining_ = false;
  bool shutdown_ = false;
  bool lingerAfterShutdown_ = false;
  std::weak_ptr<AnswerSlot> inflight_;
};

}  // namespace ductus::intake
