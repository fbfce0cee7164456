#include "common/net/stream_connection.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <vector>

#include "common/duration_text.h"
#include "common/log.h"
#include "common/net/tcp_listener.h"

namespace ductus::net {
namespace {

constexpr size_t kReadBuffer = 64 * 1024;
// How much a lingering connection reads and drops before it closes anyway.
constexpr size_t kLingerBytes = 4 << 20;

// Every connection reads into one buffer per thread: libuv allocates, reads
// and calls back one connection at a time, and the callback copies what it
// keeps (pending_, the protocol's frame) before it returns. A buffer of its
// own would cost each idle connection 64 KB.
char* readBuffer() {
  static thread_local std::unique_ptr<char[]> buffer(new char[kReadBuffer]);
  return buffer.get();
}

uint64_t millis(std::chrono::milliseconds d) {
  return static_cast<uint64_t>(std::max<int64_t>(0, d.count()));
}

// "30s", "1m", "250ms", as the limits are written in ductus.yaml.
std::string asWritten(uint64_t ms) {
  return formatDuration(std::chrono::milliseconds(static_cast<int64_t>(ms)));
}

}  // namespace

// ---- LogThrottle ----

bool LogThrottle::admit(uint64_t nowMs, uint64_t everyMs, uint64_t* unsaid) {
  if (logged_ && nowMs - lastMs_ < everyMs) {
    ++unsaid_;
    return false;
  }
  *unsaid = std::exchange(unsaid_, 0);
  logged_ = true;
  lastMs_ = nowMs;
  return true;
}

uint64_t LogThrottle::due(uint64_t nowMs, uint64_t everyMs) {
  if (unsaid_ == 0 || nowMs - lastMs_ < everyMs) return 0;
  lastMs_ = nowMs;  // saying the count is a line: a new interval starts
  return std::exchange(unsaid_, 0);
}

// ---- ConnectionSet ----

ConnectionSet::ConnectionSet(std::string name, ConnectionLimits limits, std::string refusal)
    : name_(std::move(name)), limits_(limits), refusal_(std::move(refusal)) {}

ConnectionSet::~ConnectionSet() {
  for (StreamConnection* c : live_) {
    c->set_ = nullptr;
    c->closeNow();
  }
}

bool ConnectionSet::statusOk(int status) const {
  if (status >= 0) return true;
  spdlog::warn("{}: accepting a connection failed: {}", name_, uv_strerror(status));
  return false;
}

bool ConnectionSet::admit(uv_stream_t* server, StreamConnection* c) {
  if (int rc = uv_tcp_init(server->loop, &c->tcp_); rc < 0) {
    spdlog::warn("{}: uv_tcp_init for a new connection failed: {}", name_, uv_strerror(rc));
    delete c;  // libuv never saw it
    return false;
  }
  c->set_ = this;
  c->limits_ = limits_;
  live_.insert(c);
  if (int rc = uv_accept(server, c->stream()); rc < 0) {
    spdlog::warn("{}: accepting a connection failed: {}", name_, uv_strerror(rc));
    c->closeNow();
    return false;
  }
  sockaddr_storage ss{};
  int len = sizeof ss;
  std::string host;
  if (uv_tcp_getpeername(&c->tcp_, reinterpret_cast<sockaddr*>(&ss), &len) == 0) {
    c->peer_ = formatAddress(ss);
    host = hostOf(ss);
  }
  startSweeping(server->loop);  // the sweep says the counts not logged
  // allow:: before anything is read or said, so a peer not on the list
  // learns nothing of what listens here.
  if (guard_.admits && !guard_.admits(ss)) {
    ++guard_.counts->refused;
    logGuardRefusal(uv_now(server->loop), host, c->peer_.empty() ? "?" : c->peer_,
                    "its address is not in allow:; dropped unread");
    c->closeNow();
    return false;
  }
  if (!host.empty() && fromAddress(host) >= limits_.connectionsPerAddress) {
    refuseAccepted(c, std::to_string(fromAddress(host)) + " connections from " + host +
                          " are open, the most limits.connections_per_address allows");
    return false;
  }
  uint64_t now = uv_now(server->loop);
  if (open() - 1 >= limits_.maxConnections) {  // c itself is in live_ already
    StreamConnection* idle = longestIdle(now, c);
    if (!idle) {
      refuseAccepted(c, std::to_string(open() - 1) +
                            " connections are open, the most limits.connections_per_listener "
                            "allows, and none has been idle " +
                            asWritten(millis(limits_.evictableAfter)));
      return false;
    }
    evict(idle, *c, now);
  }
  if (!host.empty()) {
    ++perAddress_[host];
    c->host_ = std::move(host);
  }
  c->start();
  return true;
}

size_t ConnectionSet::fromAddress(const std::string& host) const {
  auto it = perAddress_.find(host);
  return it == perAddress_.end() ? 0 : it->second;
}

bool StreamConnection::idle() const {
  return parsing() && !frameSince_ && pendingBytes() == 0 && unread() == 0;
}

StreamConnection* ConnectionSet::longestIdle(uint64_t now, const StreamConnection* newcomer) const {
  StreamConnection* oldest = nullptr;
  for (StreamConnection* c : live_) {
    if (c == newcomer || !c->idle() || c->lastActive_ > now || now - c->lastActive_ < millis(limits_.evictableAfter))
      continue;
    if (!oldest || c->lastActive_ < oldest->lastActive_) oldest = c;
  }
  return oldest;
}

void ConnectionSet::evict(StreamConnection* idle, const StreamConnection& newcomer, uint64_t now) {
  uint64_t unsaid = 0;
  if (evictedLog_.admit(now, millis(limits_.logEvery), &unsaid))
    spdlog::warn(
        "{}: closed the connection from {}, idle for {}, for a new one from {}{}: {} connections "
        "are open, the most limits.connections_per_listener allows; such closes are logged at "
        "most once every {}",
        name_, idle->peer_, asWritten(now - idle->lastActive_), newcomer.peer_,
        unsaid ? " (and " + std::to_string(unsaid) + " more since the last line)" : std::string(),
        open() - 1, asWritten(millis(limits_.logEvery)));
  // At once, not a shutdown: a shutdown waits for the peer, holding the slot.
  idle->closeNow();
}

void ConnectionSet::refuseAccepted(StreamConnection* c, const std::string& why) {
  if (!refusal_.empty()) {
    // Best effort, as in refuse().
    uv_buf_t b = uv_buf_init(refusal_.data(), static_cast<unsigned>(refusal_.size()));
    uv_try_write(c->stream(), &b, 1);
  }
  logRefusal(c->tcp_.loop, c->peer_.empty() ? std::string("?") : c->peer_, why);
  c->closeNow();
}

void ConnectionSet::logRefusal(uv_loop_t* loop, const std::string& peer, const std::string& why) {
  uint64_t unsaid = 0;
  if (!refusedLog_.admit(uv_now(loop), millis(limits_.logEvery), &unsaid)) return;
  spdlog::warn("{}: refused a connection from {}{}: {}; refusals are logged at most once every {}",
               name_, peer,
               unsaid ? " (and " + std::to_string(unsaid) + " more since the last line)"
                      : std::string(),
               why, asWritten(millis(limits_.logEvery)));
}

void ConnectionSet::logGuardRefusal(uint64_t now, const std::string& host, const std::string& peer,
                                    const std::string& why) {
  // Bounded: many addresses refused once each cost no more than this.
  if (guardLog_.size() >= 10000 && !guardLog_.count(host)) guardLog_.clear();
  uint64_t unsaid = 0;
  if (!guardLog_[host].admit(now, millis(limits_.logEvery), &unsaid)) return;
  spdlog::warn("{}: refused {}{}: {}; refusals from one address are logged at most once every {}",
               name_, peer,
               unsaid ? " (and " + std::to_string(unsaid) + " more from it since the last line)"
                      : std::string(),
               why, asWritten(millis(limits_.logEvery)));
}

void ConnectionSet::refuse(uv_stream_t* server) {
  // Accepted only to be closed: a connection left in the backlog would stop
  // libuv from accepting any other (it waits for uv_accept).
  auto* tcp = new uv_tcp_t{};  // freed in its close callback
  if (int rc = uv_tcp_init(server->loop, tcp); rc < 0) {
    delete tcp;
    spdlog::warn("{}: uv_tcp_init for a refused connection failed: {}", name_, uv_strerror(rc));
    return;
  }
  auto* stream = reinterpret_cast<uv_stream_t*>(tcp);
  if (uv_accept(server, stream) == 0) {
    if (!refusal_.empty()) {
      // Best effort: a few bytes on a fresh socket fit its send buffer; a
      // peer that is not reading is not waited for.
      uv_buf_t b = uv_buf_init(refusal_.data(), static_cast<unsigned>(refusal_.size()));
      uv_try_write(stream, &b, 1);
    }
    sockaddr_storage ss{};
    int len = sizeof ss;
    std::string peer = uv_tcp_getpeername(tcp, reinterpret_cast<sockaddr*>(&ss), &len) == 0
                           ? formatAddress(ss)
                           : std::string("?");
    logRefusal(server->loop, peer,
               std::to_string(open()) +
                   " connections are open, the most limits.connections_per_listener allows, "
                   "and none has been idle " +
                   asWritten(millis(limits_.evictableAfter)));
  }
  uv_close(reinterpret_cast<uv_handle_t*>(tcp),
           [](uv_handle_t* h) { delete reinterpret_cast<uv_tcp_t*>(h); });
  // The sweep says the count of the refusals not logged.
  startSweeping(server->loop);
}

void ConnectionSet::sayRefused(uint64_t count) {
  spdlog::warn(
      "{}: refused {} more connection(s) in the last {}: {} connections are open, "
      "limits.connections_per_listener is {}, limits.connections_per_address {}",
      name_, count, asWritten(millis(limits_.logEvery)), open(), limits_.maxConnections,
      limits_.connectionsPerAddress);
}

void ConnectionSet::sayEvicted(uint64_t count) {
  spdlog::warn(
      "{}: closed {} more idle connection(s) for new ones in the last {}: {} connections are "
      "open, limits.connections_per_listener is {}",
      name_, count, asWritten(millis(limits_.logEvery)), open(), limits_.maxConnections);
}

void ConnectionSet::startSweeping(uv_loop_t* loop) {
  if (closing_ && live_.empty()) return;
  if (!sweeper_) sweeper_ = makeTimer(loop, this);
  if (uv_is_active(reinterpret_cast<uv_handle_t*>(sweeper_.get()))) return;
  // A quarter of the shortest limit, so each is applied at most 25% late;
  // at most once a second, which costs a thousand connections nothing.
  auto shortest =
      std::min({limits_.idleTimeout, limits_.frameDeadline, limits_.unreadGrace, limits_.logEvery});
  uint64_t tick = std::clamp<uint64_t>(millis(shortest) / 4, 5, 1000);
  uv_timer_start(
      sweeper_.get(),
      [](uv_timer_t* t) {
        if (auto* self = static_cast<ConnectionSet*>(t->data)) self->sweep();
      },
      tick, tick);
}

void ConnectionSet::sweep() {
  uint64_t now = uv_now(sweeper_->loop);
  // Nothing leaves live_ before its close callback, later; a copy anyway,
  // as the protocols' expiry code runs in between.
  std::vector<StreamConnection*> all(live_.begin(), live_.end());
  for (StreamConnection* c : all) c->sweep(now);
  if (uint64_t n = refusedLog_.due(now, millis(limits_.logEvery))) sayRefused(n);
  if (uint64_t n = evictedLog_.due(now, millis(limits_.logEvery))) sayEvicted(n);
  if (live_.empty() && !refusedLog_.pending() && !evictedLog_.pending())
    uv_timer_stop(sweeper_.get());
}

void ConnectionSet::closeAll(std::function<void()> onClosed) {
  onClosed_ = std::move(onClosed);
  closing_ = true;
  // A connection leaves the set only in its close callback, later, but
  // iterate over a copy anyway.
  auto copy = live_;
  for (StreamConnection* c : copy) c->closeWhenIdle();
  maybeClosed();
}

void ConnectionSet::closed(StreamConnection* c) {
  live_.erase(c);
  if (c->leaving_) --leaving_;
  if (!c->host_.empty()) {
    auto it = perAddress_.find(c->host_);
    if (it != perAddress_.end() && --it->second == 0) perAddress_.erase(it);
  }
  maybeClosed();
}

void ConnectionSet::maybeClosed() {
  if (!closing_ || !live_.empty() || !onClosed_) return;
  if (uint64_t n = refusedLog_.flush()) sayRefused(n);
  if (uint64_t n = evictedLog_.flush()) sayEvicted(n);
  sweeper_.reset();
  auto cb = std::move(onClosed_);
  onClosed_ = nullptr;
  cb();  // may destroy this set: nothing after this line
}

// ---- StreamConnection ----

struct StreamConnection::WriteReq {
  uv_write_t req;
  std::string data;
};

StreamConnection::StreamConnection(size_t pendingLimit) : pendingLimit_(pendingLimit) {
  tcp_.data = this;
}

uint64_t StreamConnection::now() const { return uv_now(tcp_.loop); }

size_t StreamConnection::unread() const {
  return uv_stream_get_write_queue_size(reinterpret_cast<const uv_stream_t*>(&tcp_)) +
         outbox_.size();
}

std::string_view StreamConnection::listenerName() const {
  return set_ ? std::string_view(set_->name_) : std::string_view("connection");
}

void StreamConnection::start() {
  // peer_ was read when the set admitted the connection.
  // Answers are small and the peer waits for each: Nagle would only delay them.
  uv_tcp_nodelay(&tcp_, 1);
  setKeepAlive();
  lastActive_ = now();
  if (set_ && set_->guard_.tls) {
    tls::SslPtr ssl = set_->guard_.tls->session();
    if (!ssl) {
      spdlog::error("{}: no TLS session for the connection from {}: the certificate is not usable",
                    listenerName(), peer_);
      return closeNow();
    }
    tls_ = std::make_unique<tls::Session>(std::move(ssl));
    return enter(Phase::Handshake);
  }
  enter(Phase::Open);
}

void StreamConnection::setKeepAlive() {
  // uv_tcp_keepalive sets SO_KEEPALIVE and the idle time; libuv 1.44 leaves
  // the interval and the probe count at the kernel's 75 s and 9 probes.
  int rc = uv_tcp_keepalive(&tcp_, 1, kKeepAliveIdleSeconds);
  uv_os_fd_t fd = -1;
  if (rc == 0) rc = uv_fileno(reinterpret_cast<const uv_handle_t*>(&tcp_), &fd);
  if (rc == 0) {
    int interval = kKeepAliveIntervalSeconds, probes = kKeepAliveProbes;
    if (setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval) != 0 ||
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &probes, sizeof probes) != 0)
      rc = uv_translate_sys_error(errno);
  }
  // The connection works without it; a vanished peer is then found later.
  if (rc < 0)
    spdlog::debug("{}: TCP keepalive for {} not set: {}", listenerName(), peer_, uv_strerror(rc));
}

void StreamConnection::closeWhenIdle() {
  if (phase_ != Phase::Answering && phase_ != Phase::Streaming) return closeNow();
  draining_ = true;
  // A stream has no end of its own to wait for. A peer behind on it would
  // hold the listener's close until the idle timeout: it is cut instead.
  if (phase_ == Phase::Streaming) return unread() > 0 ? closeNow() : shutdownAndClose(false);
  syncReading();  // Answering and draining: nothing more is read
}

void StreamConnection::closeNow() {
  if (phase_ == Phase::Closed) return;
  enter(Phase::Closed);
  if (set_ && !leaving_) {
    leaving_ = true;
    ++set_->leaving_;
  }
  if (auto s = inflight_.lock()) s->conn_ = nullptr;
  uv_close(reinterpret_cast<uv_handle_t*>(&tcp_), &StreamConnection::onClose);
}

void StreamConnection::enter(Phase next) {
  if (phase_ == Phase::Closed) return;  // never left
  // A lingering connection's wait counts from the shutdown.
  if (next != Phase::Lingering) phaseSince_ = now();
  phase_ = next;
  syncReading();
}

bool StreamConnection::wantsToRead() const {
  switch (phase_) {
    case Phase::Accepted:
    case Phase::ShuttingDown:
    case Phase::Closed:
      return false;
    case Phase::Handshake:
      return true;
    case Phase::Lingering:
      return true;  // what the peer still sends is dropped, held or not
    case Phase::Streaming:
      return !backpressure_.heldSince;
    case Phase::Open:
    case Phase::Answering:
      // Paced alone does not stop reading: pending_ takes it, up to `full`.
      return !backpressure_.heldSince && !backpressure_.full && !eofSeen_ &&
             !(phase_ == Phase::Answering && draining_);
  }
  return false;
}

void StreamConnection::syncReading() {
  bool want = wantsToRead();
  if (want == reading_) return;
  if (!want) {
    // uv_close stops reading itself; the handle may be closing already.
    if (phase_ != Phase::Closed) uv_read_stop(stream());
    reading_ = false;
    return;
  }
  if (int rc = uv_read_start(stream(), &onAlloc, &onRead); rc < 0) {
    failed(IoStep::StartRead, rc);
    closeNow();
    return;
  }
  reading_ = true;
}

void StreamConnection::onClose(uv_handle_t* h) {
  auto* self = static_cast<StreamConnection*>(h->data);
  self->ended();
  if (self->set_) self->set_->closed(self);
  delete self;
}

void StreamConnection::onAlloc(uv_handle_t*, size_t, uv_buf_t* buf) {
  *buf = uv_buf_init(readBuffer(), kReadBuffer);
}

void StreamConnection::onRead(uv_stream_t* s, ssize_t n, const uv_buf_t* buf) {
  auto* self = static_cast<StreamConnection*>(s->data);
  if (n == 0) return;  // EAGAIN
  if (n > 0) {
    // Shut down: what still comes is dropped unread, TLS or not.
    if (self->tls_ && !self->shutDown()) return self->receiveTls(buf->base, static_cast<size_t>(n));
    return self->consume(buf->base, static_cast<size_t>(n));
  }
  // Lingering after an error answer: the peer has closed (or reset); done.
  if (self->shutDown()) return self->closeNow();
  // A stream's peer has nothing more to send: its end is its leaving.
  if (self->phase_ == Phase::Streaming) return self->closeNow();
  if (self->phase_ == Phase::Handshake) {
    // A port check connects and closes without a byte: not worth a line.
    if (n == UV_EOF && !self->tlsBytesSeen_) {
      spdlog::debug("{}: {} closed before a TLS handshake", self->listenerName(), self->peer_);
      return self->closeNow();
    }
    self->handshakeFailed(n == UV_EOF ? "the peer closed during the TLS handshake"
                                      : std::string("reading failed during the TLS handshake: ") +
                                            uv_strerror(static_cast<int>(n)));
    return self->closeNow();
  }
  if (n != UV_EOF) {
    self->failed(IoStep::Read, static_cast<int>(n));
    return self->closeNow();
  }
  self->peerEnded();
}

void StreamConnection::peerEnded() {
  // A peer may close its side while it waits for the answer to its last
  // request: that request, and any after it already read, are answered
  // first.
  if (phase_ == Phase::Answering || pendingBytes() > 0) {
    eofSeen_ = true;
    syncReading();
  } else {
    endOfInput();
  }
}

void StreamConnection::receiveTls(const char* p, size_t n) {
  tlsBytesSeen_ = true;
  std::string plain;
  const bool handshaking = phase_ == Phase::Handshake;
  tls::Session::State state = tls_->receive(std::string_view(p, n), plain);
  flushTls();  // handshake messages, alerts, tickets: in order, before any answer
  if (phase_ == Phase::Closed) return;
  if (state == tls::Session::State::Handshaking) return;
  if (state == tls::Session::State::Failed) {
    if (handshaking) return handshakeFailed(tls_->reason());
    // After the handshake a TLS error is the connection's end, like a
    // failed read: nothing it sent after can be trusted to be whole.
    spdlog::debug("{}: TLS from {} failed: {}", listenerName(), peer_, tls_->reason());
    return shutdownAndClose(false);
  }
  if (handshaking) {
    if (set_ && set_->guard_.tls) {
      if (auto why = set_->guard_.tls->refusal(tls_->peerCertificate()))
        return handshakeFailed(*why);
    }
    if (set_) ++set_->guard_.counts->handshakes;
    spdlog::debug("{}: {} from {}", listenerName(), tls_->version(), peer_);
    lastActive_ = now();
    enter(Phase::Open);
  }
  if (!plain.empty()) consume(plain.data(), plain.size());
  // close_notify: the peer has nothing more to send.
  if (state == tls::Session::State::Closed && phase_ != Phase::Closed && !shutDown() &&
      phase_ != Phase::Streaming)
    peerEnded();
}

void StreamConnection::handshakeFailed(const std::string& why) {
  if (set_) {
    ++set_->guard_.counts->handshakeFailures;
    set_->logGuardRefusal(now(), host_, peer_.empty() ? "?" : peer_, "TLS: " + why);
  }
  // Its alert is queued already: let it out, then close.
  if (phase_ == Phase::Closed) return;
  tls_->fail(why);
  shutdownAndClose(false);
}

void StreamConnection::flushTls() {
  if (tls_ && tls_->hasOutput() && phase_ != Phase::Closed) submitRaw(tls_->takeOutput());
}

void StreamConnection::onWrite(uv_write_t* req, int status) {
  std::unique_ptr<WriteReq> w(reinterpret_cast<WriteReq*>(req));
  auto* self = static_cast<StreamConnection*>(req->handle->data);
  --self->writesInFlight_;
  // ECANCELED: the connection is being closed; nothing failed.
  if (status < 0 && status != UV_ECANCELED) {
    self->failed(IoStep::Write, status);
    return self->closeNow();
  }
  if (self->phase_ == Phase::Closed) return;
  if (self->writesInFlight_ == 0 && !self->outbox_.empty())
    self->submit(std::exchange(self->outbox_, {}));
  if (self->phase_ == Phase::Closed) return;
  Backpressure& bp = self->backpressure_;
  if (bp.pacedSince) {
    bp.pacedSince.reset();
    if (!bp.heldSince) return self->goOn();
  }
  // Half of the limit, not the limit itself: reading is not stopped and
  // started again around every answer of a peer that reads slowly.
  if (bp.heldSince && self->unread() <= self->limits_.unreadAnswers / 2) self->release();
}

void StreamConnection::onShutdown(uv_shutdown_t* req, int status) {
  std::unique_ptr<uv_shutdown_t> owned(req);
  auto* self = static_cast<StreamConnection*>(req->handle->data);
  if (self->phase_ == Phase::Closed) return;
  if (status < 0 || !self->lingerAfterShutdown_) return self->closeNow();
  self->enter(Phase::Lingering);  // read and drop until the peer closes
}

void StreamConnection::consume(const char* p, size_t n) {
  if (shutDown() || phase_ == Phase::Streaming) return drop(n);
  if (!parsing()) {
    pending_.append(p, n);
    if (pendingBytes() >= pendingLimit_) {
      backpressure_.full = true;
      syncReading();
    }
    return;
  }
  size_t used = feedAll(p, n);
  if (phase_ == Phase::Closed || shutDown()) return;
  // The handler answered with a stream at once: what followed the request
  // is no request.
  if (phase_ == Phase::Streaming) return drop(n - used);
  if (used < n) pending_.append(p + used, n - used);
  if ((phase_ == Phase::Answering || backpressure_.pacedSince) &&
      pendingBytes() >= pendingLimit_) {
    backpressure_.full = true;
    syncReading();
  }
}

// Read after a shutdown (lingering) or during a stream: what the peer still
// sends goes nowhere, up to a bound.
void StreamConnection::drop(size_t n) {
  lingered_ += n;
  if (lingered_ > kLingerBytes) closeNow();
}

size_t StreamConnection::feedAll(const char* p, size_t n) {
  size_t used = 0;
  feeding_ = true;
  // Held or paced: the peer has not taken the answers already given, so no
  // request is parsed (nor answered) until it does.
  while (parsing() && used < n)
    used += feed(p + used, n - used);
  feeding_ = false;
  return used;
}

void StreamConnection::drainPending() {
  if (pendingBytes() == 0) return;
  pendingAt_ += feedAll(pending_.data() + pendingAt_, pendingBytes());
  // What was parsed is dropped once it is most of the buffer: erasing it at
  // every request would move the rest each time (a megabyte of pipelined
  // frames, one per loop turn, is a megabyte moved per frame).
  if (pendingAt_ == pending_.size()) {
    // An idle connection keeps no buffer of a burst it once had.
    pending_ = std::string();
    pendingAt_ = 0;
  } else if (pendingAt_ > pending_.size() / 2) {
    pending_.erase(0, pendingAt_);
    pendingAt_ = 0;
  }
}

void StreamConnection::frameBegun() {
  lastActive_ = now();
  if (!frameSince_) frameSince_ = lastActive_;
}

void StreamConnection::frameEnded() {
  frameSince_.reset();
  lastActive_ = now();
}

void StreamConnection::frameExpired(std::chrono::milliseconds) { closeNow(); }

void StreamConnection::beginRequest(const std::shared_ptr<AnswerSlot>& slot) {
  // A connection closed under the protocol (a failed write) takes no
  // request: the answer, when it comes, goes nowhere.
  if (phase_ == Phase::Closed) return;
  slot->conn_ = this;
  inflight_ = slot;
  enter(Phase::Answering);
}

void StreamConnection::beginStream(const std::shared_ptr<AnswerSlot>& slot) {
  if (phase_ == Phase::Closed) return;
  slot->conn_ = this;
  inflight_ = slot;
  // Read behind the request: no request follows a stream.
  pending_ = std::string();
  pendingAt_ = 0;
  backpressure_.full = false;
  if (eofSeen_) return closeNow();
  // Reading stopped behind the request; from here it goes on, to see the
  // peer leave.
  if (!shutDown()) enter(Phase::Streaming);
}

void StreamConnection::endRequest(std::string answer, bool keepOpen) {
  inflight_.reset();
  lastActive_ = now();
  if (phase_ == Phase::Answering) enter(Phase::Open);
  write(std::move(answer));
  if (phase_ == Phase::Closed) return;
  if (!keepOpen || draining_) return shutdownAndClose(false);
  // Answered from inside feed(): the loop on the stack stops until the
  // answer is written (answerNow).
  if (feeding_) return pace();
  goOn();
}

void StreamConnection::answerNow(std::string answer) {
  write(std::move(answer));
  if (feeding_ && phase_ != Phase::Closed) pace();
}

void StreamConnection::pace() {
  if (writesInFlight_ == 0) return;
  backpressure_.pacedSince = now();
}

// Nothing in flight: what the peer sent next is parsed, then reading
// resumes.
void StreamConnection::goOn() {
  if (!parsing()) return;
  drainPending();
  if (!parsing()) return;
  if (eofSeen_) return endOfInput();
  backpressure_.full = false;
  syncReading();
}

void StreamConnection::endOfInput() {
  inputEnded();
  shutdownAndClose(false);
}

void StreamConnection::write(std::string bytes) {
  if (!writable()) return;
  // Reading stopped at unreadAnswers; a peer still this far behind when
  // another answer is due has stopped reading altogether.
  if (size_t queued = unread(); queued > limits_.unreadAnswers * kUnreadHardCapFactor) {
    spdlog::warn(
        "{}: closing the connection from {}: {} bytes of answers are unread, over {} "
        "times limits.unread_answers",
        listenerName(), peer_, queued, kUnreadHardCapFactor);
    return closeNow();
  }
  if (writesInFlight_ > 0)
    outbox_.append(bytes);
  else
    submit(std::move(bytes));
  if (phase_ != Phase::Closed && !backpressure_.heldSince && unread() > limits_.unreadAnswers)
    holdBack();
}

void StreamConnection::submit(std::string bytes) {
  if (tls_) {
    tls_->send(bytes);
    bytes = tls_->takeOutput();
    if (bytes.empty()) return;
  }
  submitRaw(std::move(bytes));
}

void StreamConnection::submitRaw(std::string bytes) {
  auto w = std::make_unique<WriteReq>();
  w->data = std::move(bytes);
  uv_buf_t b = uv_buf_init(w->data.data(), w->data.size());
  if (int rc = uv_write(&w->req, stream(), &b, 1, &onWrite); rc < 0) {
    failed(IoStep::Write, rc);
    closeNow();
    return;
  }
  w.release();  // freed in onWrite
  ++writesInFlight_;
}

void StreamConnection::holdBack() {
  backpressure_.heldSince = now();
  // TCP now holds the peer back: what it sends waits in the kernel.
  syncReading();
  spdlog::debug("{}: {} has {} bytes of answers unread; reading from it stops until it takes them",
                listenerName(), peer_, unread());
}

void StreamConnection::release() {
  backpressure_.heldSince.reset();
  // With a request in flight, reading goes on as consume() would have left it.
  if (phase_ == Phase::Answering && pendingBytes() < pendingLimit_) backpressure_.full = false;
  syncReading();
  goOn();
}

void StreamConnection::shutdownAndClose(bool linger) {
  if (!writable()) return;
  // A closing listener waits for this connection: no lingering then.
  lingerAfterShutdown_ = linger && !draining_;
  enter(Phase::ShuttingDown);
  // libuv writes nothing after a shutdown: the outbox goes first, then
  // TLS's close_notify, so the peer can tell an end from a cut.
  if (!outbox_.empty()) submit(std::exchange(outbox_, {}));
  if (tls_ && tls_->state() == tls::Session::State::Open && phase_ != Phase::Closed) {
    tls_->close();
    flushTls();
  }
  if (phase_ == Phase::Closed) return;
  auto req = std::make_unique<uv_shutdown_t>();
  if (uv_shutdown(req.get(), stream(), &onShutdown) < 0) return closeNow();
  req.release();  // freed in onShutdown
}

void StreamConnection::sweep(uint64_t now) {
  auto past = [now](uint64_t since, std::chrono::milliseconds limit) {
    return now >= since && now - since >= millis(limit);
  };
  switch (phase_) {
    case Phase::Accepted:
    case Phase::Closed:
      return;
    case Phase::Handshake:
      if (set_ && past(phaseSince_, set_->guard_.handshakeTimeout)) {
        ++set_->guard_.counts->handshakeFailures;
        set_->logGuardRefusal(now, host_, peer_.empty() ? "?" : peer_,
                              "TLS: the handshake did not finish within " +
                                  asWritten(millis(set_->guard_.handshakeTimeout)));
        closeNow();
      }
      return;
    case Phase::ShuttingDown:
    case Phase::Lingering:
      // Waiting for the peer to take the last answer, or to close: a peer
      // that does neither does not keep the connection.
      if (past(phaseSince_, limits_.idleTimeout)) closeNow();
      return;
    case Phase::Open:
    case Phase::Answering:
    case Phase::Streaming:
      break;
  }
  // Not taking its answers: over limits_.unreadAnswers, or an answer given
  // from inside feed() still not written. Either way nothing is read or
  // parsed, and the peer is waited for no longer than unreadGrace.
  if (backpressure_.parsingWaits()) {
    uint64_t since = backpressure_.since();
    if (past(since, limits_.unreadGrace)) {
      spdlog::warn(
          "{}: closing the connection from {}: answers unread for {} ({} bytes; "
          "limits.unread_answers is {} bytes)",
          listenerName(), peer_, asWritten(now - since), unread(), limits_.unreadAnswers);
      closeNow();
    }
    return;
  }
  if (frameSince_) {
    uint64_t since = *frameSince_;
    if (past(since, limits_.frameDeadline)) {
      frameSince_.reset();
      frameExpired(std::chrono::milliseconds(now - since));
      if (writable()) closeNow();
    }
    return;
  }
  if (phase_ != Phase::Open || pendingBytes() > 0) return;
  if (past(lastActive_, limits_.idleTimeout)) {
    spdlog::debug("{}: closing the connection from {}: idle for {}", listenerName(), peer_,
                  asWritten(now - lastActive_));
    shutdownAndClose(false);
  }
}

}  // namespace ductus::net
