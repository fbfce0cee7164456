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
// It also bounds what one peer can hold of the supervisor
// (ConnectionLimits): how long it may stay idle or take over one request,
// how much of its answers it may leave unread, and TCP keepalive so a peer
// that vanished is noticed. An answer given while parsing (MLLP's AR to a
// frame without MSH, HTTP's 404) paces the connection like a handler's
// would: nothing more is parsed until it is written, so a peer pipelining
// requests that are refused at once gets one answer per loop turn and
// cannot keep the loop to itself. All connections read into one buffer, so
// an idle one costs little more than its descriptor.
//
// ConnectionSet holds a listener's connections until each has closed, and
// shares its slots fairly: one address gets at most a share of them, and
// when they are all taken the connection idle the longest gives way to the
// new one; AnswerSlot makes the first of a handler's answers the only one.
#pragma once

#include <uv.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "common/net/listener_guard.h"
#include "common/tls/session.h"
#include "common/uv_handle.h"

namespace ductus::net {

// What one listener lets its peers hold: descriptors, buffers, log lines.
// Each has a default an engine can live with; `limits:` in ductus.yaml
// sets the first five.
struct ConnectionLimits {
  // Connections open at once (each holds a descriptor and its buffers).
  // When they are all open, the one idle the longest (below) is closed for
  // a new one; with none idle, the new one is accepted and closed at once.
  size_t maxConnections = 1000;
  // Connections open at once from one address (an IPv4-mapped IPv6 address
  // counts as its IPv4 one); past it a new one from that address is
  // refused as above. A quarter of maxConnections by default (ductus.yaml's
  // loader computes it from connections_per_listener), so one host holding
  // idle connections cannot take every slot from the others.
  size_t connectionsPerAddress = 250;
  // A connection with nothing in flight and no partial request is closed
  // after this long. Also how long a connection that was shut down may wait
  // for its peer to take the last answer or to close.
  std::chrono::milliseconds idleTimeout = std::chrono::minutes(5);
  // A request (an MLLP frame, an HTTP head and body) must be complete this
  // long after its first byte, or the connection is closed: a 64 MB frame
  // trickled in forever would otherwise be held forever.
  std::chrono::milliseconds frameDeadline = std::chrono::seconds(60);
  // Answers written but not taken by the peer (libuv's write queue and the
  // outbox): past this, the connection stops reading and parsing until the
  // peer has taken half of it, so a peer that sends and never reads is held
  // back by TCP instead of growing the queue.
  size_t unreadAnswers = size_t{1} << 20;
  // A connection over unreadAnswers this long is closed; so is one whose
  // answer to a refused frame (or any answer given while parsing) has not
  // been taken by the peer this long: nothing is parsed behind it.
  std::chrono::milliseconds unreadGrace = std::chrono::seconds(30);
  // Warnings a peer can repeat at will (refused connections, refused
  // frames) are logged at most once per this, with the count of the rest.
  std::chrono::milliseconds logEvery = std::chrono::minutes(1);
  // A full listener closes for a new connection only one idle (nothing in
  // flight, nothing partial, no answer unwritten) at least this long: a
  // sender that has just connected, or just been answered, is about to
  // send, and a flood of connects must not close it before it can.
  std::chrono::milliseconds evictableAfter = std::chrono::seconds(2);
};

// An answer due while the peer has left this many times unreadAnswers
// unread closes the connection at once: reading has stopped long before, so
// only a misbehaving peer gets here.
constexpr size_t kUnreadHardCapFactor = 4;

// TCP keepalive on every accepted connection: a peer that vanished without
// a FIN (power cut, a NAT that dropped the mapping) is found after
// 15 + 5 x 3 = 30 s of silence instead of the kernel's 2 h 11 min, and its
// connection, descriptor and partial request are let go.
constexpr int kKeepAliveIdleSeconds = 15;
constexpr int kKeepAliveIntervalSeconds = 5;
constexpr int kKeepAliveProbes = 3;

// At most one log line per interval for an event a peer can repeat at
// will: the first is logged at once, the ones within the interval after a
// line are counted, and the count goes with the next line (or flush()).
class LogThrottle {
 public:
  // Whether to log an event at nowMs; if so, *unsaid is how many were not
  // logged since the last line.
  bool admit(uint64_t nowMs, uint64_t everyMs, uint64_t* unsaid);
  // The count not yet logged once the interval has passed (0 otherwise, or
  // when there is none); it is then said, and a new interval starts.
  uint64_t due(uint64_t nowMs, uint64_t everyMs);
  // The count not yet logged, at the end (the connection closes).
  uint64_t flush() { return std::exchange(unsaid_, 0); }
  bool pending() const { return unsaid_ > 0; }

 private:
  bool logged_ = false;
  uint64_t lastMs_ = 0;
  uint64_t unsaid_ = 0;
};

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
  // The connection without taking it: a stream's state (beginStream) keeps
  // it until the connection closes.
  template <class Connection>
  Connection* connection() const {
    return static_cast<Connection*>(conn_);
  }

 private:
  friend class StreamConnection;
  StreamConnection* conn_ = nullptr;
};

// The connections one listening socket accepted, until each has closed.
// A new connection from an address that already holds
// limits.connectionsPerAddress, or one past limits.maxConnections when no
// connection has been idle limits.evictableAfter, is accepted, told
// `refusal` (if any) and closed at once. Past limits.maxConnections
// otherwise, the connection idle the longest is closed for the new one.
// Refusals and those closes are each logged once per limits.logEvery, with
// the count of the rest. A timer sweeps the connections for the time
// limits while there are any.
class ConnectionSet {
 public:
  // name: the listener's, for the log. refusal: what a connection past the
  // limit is sent before it is closed ("" for nothing).
  ConnectionSet(std::string name, ConnectionLimits limits, std::string refusal = {});
  ConnectionSet(const ConnectionSet&) = delete;
  ConnectionSet& operator=(const ConnectionSet&) = delete;
  // Closes every connection at once; answers in flight go nowhere.
  ~ConnectionSet();

  // Accepts the connection waiting on `server` (status: what the listen
  // callback got) into a new Connection(args...), which owns itself from
  // here. Null when that fails (logged) or the set is full (refused).
  template <class Connection, class... Args>
  Connection* accept(uv_stream_t* server, int status, Args&&... args) {
    if (!statusOk(status)) return nullptr;
    // Full, and nobody to give way: refused before a connection is built.
    if (open() >= limits_.maxConnections && !longestIdle(uv_now(server->loop))) {
      refuse(server);
      return nullptr;
    }
    auto* c = new Connection(std::forward<Args>(args)...);  // deleted in its close callback
    return admit(server, c) ? c : nullptr;
  }

  // Idle connections close now, busy ones once their answer is written;
  // onClosed runs when the last has closed (at once if there are none) and
  // may destroy this set.
  void closeAll(std::function<void()> onClosed);

  size_t size() const { return live_.size(); }
  // Connections open from `host` (hostOf(): "127.0.0.1", "2001:db8::1").
  size_t fromAddress(const std::string& host) const;

  // allow: and tls: for connections accepted from here on (listener_guard.h).
  void guard(ListenerGuard g) { guard_ = std::move(g); }
  const ListenerGuard& guard() const { return guard_; }

 private:
  friend class StreamConnection;
  bool statusOk(int status) const;
  // Connections holding a slot: those closed for a new one are still in
  // live_ until their close callback, but no longer count.
  size_t open() const { return live_.size() - leaving_; }
  bool admit(uv_stream_t* server, StreamConnection* c);
  void refuse(uv_stream_t* server);
  // `c` is accepted but not started: it is told `refusal_` and closed.
  void refuseAccepted(StreamConnection* c, const std::string& why);
  void logRefusal(uv_loop_t* loop, const std::string& peer, const std::string& why);
  // The connection idle the longest, at least limits.evictableAfter; null
  // when none is (the newcomer, not started yet, never is). A scan: it runs
  // only while the listener is full.
  StreamConnection* longestIdle(uint64_t now, const StreamConnection* newcomer = nullptr) const;
  void evict(StreamConnection* idle, const StreamConnection& newcomer, uint64_t now);
  void closed(StreamConnection* c);
  void maybeClosed();
  void startSweeping(uv_loop_t* loop);
  void sweep();
  void sayRefused(uint64_t count);
  void sayEvicted(uint64_t count);
  // A connection refused by allow: or TLS, logged at most once per
  // limits.logEvery for each address (with the count of the rest).
  void logGuardRefusal(uint64_t now, const std::string& host, const std::string& peer,
                       const std::string& why);

  const std::string name_;
  const ConnectionLimits limits_;
  std::string refusal_;
  std::unordered_set<StreamConnection*> live_;
  // Open connections per address (hostOf()); an address leaves with its last.
  std::unordered_map<std::string, size_t> perAddress_;
  // In live_ and closed (uv_close called: refused, evicted, ended), not yet
  // gone: they hold no slot. Refused ones would otherwise count until their
  // close callbacks, and a burst of refusals accepted in one loop turn made
  // a listener with room look full to the next honest peer.
  size_t leaving_ = 0;
  UvHandle<uv_timer_t> sweeper_;  // runs while there is something to sweep
  LogThrottle refusedLog_;
  LogThrottle evictedLog_;
  ListenerGuard guard_;
  // Per address, for logGuardRefusal; emptied when it grows past a bound
  // (many addresses each refused once cost no more than that).
  std::unordered_map<std::string, LogThrottle> guardLog_;
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

  // Where a connection is in its life; exactly one at a time, changed only
  // by enter(). Whether it reads follows from the phase and the
  // backpressure below (wantsToRead()), never set on its own. A new phase
  // is one value here, its line in wantsToRead() and sweep(), and the
  // calls that enter and leave it.
  enum class Phase : uint8_t {
    // Built and accepted, not started: the set may still refuse it. Not
    // reading. Leaves by start() (Handshake with TLS, else Open) or
    // closeNow() (Closed).
    Accepted,
    // TLS: the handshake runs; the protocol sees nothing yet. Reads what the
    // peer sends into the session, writes the session's answers. Leaves for
    // Open once the handshake is done and the client's certificate allowed,
    // else Closed (its reason logged once a minute per address); Closed
    // too after the guard's handshakeTimeout.
    Handshake,
    // Between requests, or inside one not yet complete (frameSince_): reads
    // and parses what the peer sends, unless backpressure holds it. The
    // idle timeout and the frame deadline apply. Leaves when the protocol
    // has a request (Answering) or a stream (Streaming), shuts down
    // (ShuttingDown), or closes (Closed).
    Open,
    // A request is with the handler: nothing is parsed; what the peer sends
    // waits in pending_, up to pendingLimit_, then reading stops. Leaves by
    // endRequest() (Open, or ShuttingDown when the connection is not kept
    // or the listener is draining), beginStream() (Streaming), or Closed.
    Answering,
    // The answer is a stream (beginStream): no request follows; what the
    // peer sends is read and dropped, to see it leave. No idle timeout.
    // Leaves only by a shutdown (the stream's end) or Closed.
    Streaming,
    // The last answer is queued and the write side is being shut down: not
    // reading, nothing more is written. Leaves for Lingering (the shutdown
    // is done and the peer may still send) or Closed; after
    // limits().idleTimeout from the shutdown, Closed.
    ShuttingDown,
    // Shut down after an error answer: reads and drops what the peer still
    // sends (up to kLingerBytes) so the kernel sends no RST over the answer.
    // Leaves for Closed when the peer closes, or limits().idleTimeout after
    // the shutdown.
    Lingering,
    // uv_close has been called: nothing is read, written or swept; the close
    // callback deletes the connection. Never left.
    Closed,
  };

  // Why parsing, or reading, waits for the peer apart from the phase: any of
  // these at once, or none. A since-time is what the sweep needs
  // (limits().unreadGrace runs from the earlier of the two).
  struct Backpressure {
    // An answer given from inside feed() is not written yet: nothing more is
    // parsed until it is (reading goes on, into pending_).
    std::optional<uint64_t> pacedSince;
    // Over limits().unreadAnswers unread: nothing is read or parsed until
    // the peer has taken half of it.
    std::optional<uint64_t> heldSince;
    // pendingLimit_ bytes wait behind a request or a paced answer: reading
    // stops until they are parsed (goOn) or a hold ends with room again.
    bool full = false;

    bool parsingWaits() const { return pacedSince || heldSince; }
    uint64_t since() const {
      return pacedSince && heldSince ? std::min(*pacedSince, *heldSince)
                                     : pacedSince.value_or(heldSince.value_or(0));
    }
  };

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
  // The request begun frameAge ago is still not complete after
  // limits().frameDeadline: the protocol says so (an answer, a log line)
  // and closes or shuts down; closed right after otherwise.
  virtual void frameExpired(std::chrono::milliseconds frameAge);
  // The connection has closed (its handle is gone); last words for the log.
  virtual void ended() {}

  // ---- for the protocol ----

  // Whether the connection is still its listener's; false once the listener
  // is gone, which the protocol must check before reaching for it.
  bool attached() const { return set_ != nullptr; }
  // Whether the connection closes after the answer in flight (its listener
  // is closing).
  bool draining() const { return draining_; }
  // Where the connection is (tests and the log; the protocol asks writable()).
  Phase phase() const { return phase_; }
  const Backpressure& backpressure() const { return backpressure_; }
  bool reading() const { return reading_; }
  // The limits the connection was accepted under.
  const ConnectionLimits& limits() const { return limits_; }
  // The loop's clock, in milliseconds.
  uint64_t now() const;
  uv_loop_t* loop() const { return tcp_.loop; }

  // The first byte of a request has been read: from here it must be
  // complete within limits().frameDeadline. Bytes outside any request (an
  // MLLP sender's stray bytes) never call it, so they do not keep an idle
  // connection open.
  void frameBegun();
  // The request is complete (or refused): no deadline runs, and the idle
  // time counts from here.
  void frameEnded();
  // A complete request goes to the handler, whose answer holds `slot`.
  void beginRequest(const std::shared_ptr<AnswerSlot>& slot);
  // The request in flight is answered by a stream (HTTP's Server-Sent
  // Events): write() adds to its answer over time, and `slot` holds the
  // connection until it closes. The request stays in flight, so the idle
  // timeout does not apply; no request follows it. What the peer sends
  // from here is read and dropped, so that its leaving is seen at once: an
  // end of input closes the connection (a peer that half-closes cannot be
  // told from one that left). A closing listener ends the stream: a
  // shutdown once everything is written, or at once if the peer is behind.
  void beginStream(const std::shared_ptr<AnswerSlot>& slot);
  // Whether write() still sends: not closing, not shut down.
  bool writable() const { return !shutDown() && phase_ != Phase::Closed; }
  // Bytes of answers not yet taken by the peer's kernel: libuv's write
  // queue and the outbox.
  size_t unread() const;
  // Writes the answer (to the request in flight, or one the protocol gives
  // itself from inside feed()) and goes on with what the peer sent next;
  // shuts down instead when !keepOpen or draining().
  void endRequest(std::string answer, bool keepOpen);
  // An answer the protocol gives itself from inside feed() without a
  // request (MLLP's AR to a frame it refuses). Like an answer given there
  // by endRequest(), nothing more is parsed until it is written: one answer
  // per loop turn, as a handler's commit paces a real message, so a peer
  // pipelining frames it knows are refused cannot keep the loop to itself.
  void answerNow(std::string answer);
  // Queues bytes to the peer; dropped once the connection is closing or
  // shut down. Past limits().unreadAnswers unread, the connection stops
  // reading and parsing until the peer catches up.
  void write(std::string bytes);
  // Closes once everything queued is written (uv_close would cancel it).
  // linger: until the peer closes, read and drop what it still sends (up to
  // a limit), because closing a socket with unread data makes the kernel
  // send RST, which can destroy the answer before the peer reads it. Either
  // wait ends after limits().idleTimeout.
  void shutdownAndClose(bool linger);
  // Closes at once; queued answers are dropped.
  void closeNow();

 private:
  friend class ConnectionSet;
  struct WriteReq;

  static void onClose(uv_handle_t* h);
  static void onAlloc(uv_handle_t* h, size_t, uv_buf_t* buf);
  static void onRead(uv_stream_t* s, ssize_t n, const uv_buf_t* buf);
  static void onWrite(uv_write_t* req, int status);
  static void onShutdown(uv_shutdown_t* req, int status);

  uv_stream_t* stream() { return reinterpret_cast<uv_stream_t*>(&tcp_); }
  std::string_view listenerName() const;
  size_t pendingBytes() const { return pending_.size() - pendingAt_; }
  void start();
  void setKeepAlive();
  void closeWhenIdle();
  // The one place a phase changes: records when (what the sweep needs) and
  // starts or stops reading as the new phase wants.
  void enter(Phase next);
  // Whether the connection should be reading now (phase, backpressure, the
  // peer's end of input); syncReading() makes it so.
  bool wantsToRead() const;
  void syncReading();
  // A request may be parsed now: Open, and no answer holds parsing back.
  bool parsing() const { return phase_ == Phase::Open && !backpressure_.parsingWaits(); }
  bool shutDown() const { return phase_ == Phase::ShuttingDown || phase_ == Phase::Lingering; }
  void consume(const char* p, size_t n);
  void drop(size_t n);
  size_t feedAll(const char* p, size_t n);
  void drainPending();
  void goOn();
  void endOfInput();
  void submit(std::string bytes);
  // Bytes as they go on the wire (TLS's output, or plain text without it).
  void submitRaw(std::string bytes);
  // TLS: what the peer sent goes through the session.
  void receiveTls(const char* p, size_t n);
  void handshakeFailed(const std::string& why);
  void flushTls();
  // The peer has nothing more to send (a TCP EOF, or TLS's close_notify).
  void peerEnded();
  void pace();
  void holdBack();
  void release();
  // The set's timer: applies the time limits at `now`.
  void sweep(uint64_t now);
  // Nothing in flight, nothing partial, nothing unwritten: closing it now
  // loses nothing.
  bool idle() const;

  uv_tcp_t tcp_{};
  ConnectionSet* set_ = nullptr;  // null until accepted and once the set is gone
  ConnectionLimits limits_;       // copied from the set when accepted
  const size_t pendingLimit_;
  std::string peer_;
  std::string host_;  // counted in set_->perAddress_ under this ("": not counted)
  std::string pending_;  // read behind the request in flight, from pendingAt_
  size_t pendingAt_ = 0;
  // Answers given while a write is in flight, sent as one write when it
  // completes: a peer that pipelines gets thousands of small answers, and
  // a request and a buffer each would cost several times their bytes.
  std::string outbox_;
  size_t writesInFlight_ = 0;
  size_t lingered_ = 0;
  Phase phase_ = Phase::Accepted;
  uint64_t phaseSince_ = 0;  // entered phase_ (Lingering keeps ShuttingDown's)
  Backpressure backpressure_;
  uint64_t lastActive_ = 0;  // accepted, a request begun or ended, an answer given
  std::optional<uint64_t> frameSince_;  // a request has begun and is not complete
  bool reading_ = false;  // libuv is reading: follows wantsToRead()
  bool feeding_ = false;  // feed() is on the stack
  bool eofSeen_ = false;  // the peer closed; close after answering what it sent
  bool draining_ = false;  // the listener is closing: shut down after the answer in flight
  bool leaving_ = false;  // closed while in a set: counted in set_->leaving_
  bool lingerAfterShutdown_ = false;  // ShuttingDown goes on to Lingering
  std::weak_ptr<AnswerSlot> inflight_;
  std::unique_ptr<tls::Session> tls_;  // null without TLS
  bool tlsBytesSeen_ = false;          // the peer has sent something of a handshake
};

}  // namespace ductus::net
