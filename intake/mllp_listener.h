// MllpListener: HL7 v2 over MLLP on libuv TCP. Each frame is
// 0x0B <message> 0x1C 0x0D; bytes before 0x0B are skipped (and logged once
// per connection). One message at a time per connection: once a frame is
// complete the connection stops reading (uv_read_stop) until the handler
// answers, so a sender never has two messages in flight here and ACKs go
// out in order. The message bytes reach the handler exactly as they came.
//
// The handler decides the answer, later if it wants (after the store's
// commit: persist before acknowledge). The listener itself answers, without
// calling the handler:
// * AR "message too large" for a frame over maxMessageBytes: the frame is
//   read to its end and discarded, so the connection stays in sync;
// * AR "no MSH segment" (or the delimiter error) for a frame with no
//   readable MSH (MSA-2 still echoes MSH-10 when MSH-1 can be read);
// * AR "message contains MLLP framing bytes ..." for a frame holding a
//   second start block (0x0B): a message nested in this one, which would
//   leave here as two (hl7::mllp::refuseFramingBytes).
// Those refusals are logged at most once a minute per connection (a peer
// can send them at will); the lines say how many were not. Like an ACK
// after a commit, each AR is written before the next frame is read, so a
// sender pipelining refused frames gets one answer per loop turn.
//
// settings.limits bound what each connection may hold (stream_connection.h):
// past maxConnections a connection is closed unanswered; an idle one is
// closed after idleTimeout; a frame not complete within frameDeadline of
// its start block closes its connection; a sender that leaves more than
// unreadAnswers of ACKs unread is no longer read from.
#pragma once

#include <uv.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "common/hl7/ack.h"
#include "common/result.h"
#include "common/uv_handle.h"
#include "common/net/stream_connection.h"
#include "common/net/tcp_listener.h"

namespace ductus::intake {

struct MllpPeer {
  std::string address;  // "127.0.0.1:53412"
  uint64_t connection = 0;  // unique per listener, for logs
};

struct MllpSettings {
  // Messages carrying documents (base64 PDFs in OBX-5) run to tens of MB.
  size_t maxMessageBytes = size_t{64} << 20;
  // A name for logs, e.g. the interface's.
  std::string name = "mllp";
  net::ConnectionLimits limits;
  // allow: and tls: (common/net/listener_guard.h); empty: plain, everyone.
  net::ListenerGuard guard;
  // Hears each refusal the log says (at most once per limits.logEvery and
  // connection): the peer, why, and how many more were refused since the
  // last one said. Null: nobody.
  std::function<void(const std::string& peer, const std::string& why, uint64_t unsaid)> onRefused;
};

class MllpConnection;

// Sends the ACK built from the message it belongs to. Copyable (it is a
// std::function target); the first call anywhere wins, later ones do
// nothing, and so does a call after the connection has gone. If every copy
// is dropped without a call, the sender gets AE "message was not answered"
// so the connection does not hang.
class MllpAnswer {
 public:
  void operator()(hl7::AckCode code, std::string_view text = {}) const;
  // Whether an answer has been sent (or the connection is gone).
  bool answered() const;

 private:
  friend class MllpConnection;
  struct State;
  explicit MllpAnswer(std::shared_ptr<State> s) : state_(std::move(s)) {}
  std::shared_ptr<State> state_;
};

class MllpListener {
 public:
  using Handler = std::function<void(const MllpPeer&, std::string bytes, MllpAnswer answer)>;

  MllpListener(uv_loop_t* loop, MllpSettings settings, Handler handler);
  // Closes everything at once (in-flight answers become no-ops). Prefer
  // close() and wait for its callback.
  ~MllpListener();
  MllpListener(const MllpListener&) = delete;
  MllpListener& operator=(const MllpListener&) = delete;

  // Binds and listens; port 0 picks a free port (see port()).
  [[nodiscard]] Status listen(const std::string& host, uint16_t port, int backlog = 511);
  // Listens on a socket that is already bound and listening (systemd's
  // LISTEN_FDS, a handover). Takes ownership of fd, also on failure.
  [[nodiscard]] Status adopt(int fd);

  // The bound address, e.g. "127.0.0.1:2575".
  std::string address() const;
  uint16_t port() const;
  size_t connectionCount() const { return connections_.size(); }
  // The listening socket, -1 before listen (for systemd's fd store; still
  // owned here).
  int fd() const {
    uv_os_fd_t fd = -1;
    if (!server_ || uv_fileno(reinterpret_cast<const uv_handle_t*>(server_.get()), &fd) != 0)
      return -1;
    return fd;
  }

  // Stops accepting, closes idle connections at once and the others right
  // after their answer has been written; onClosed runs when the listening
  // socket and every connection are closed.
  void close(std::function<void()> onClosed);

 private:
  friend class MllpConnection;
  static void onConnection(uv_stream_t* server, int status);
  net::TcpListen how();

  uv_loop_t* loop_;
  MllpSettings settings_;
  Handler handler_;
  UvHandle<uv_tcp_t> server_;
  net::ConnectionSet connections_;
  uint64_t nextConnection_ = 1;
};

}  // namespace ductus::intake
