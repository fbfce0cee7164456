#include "intake/stream_connection.h"

#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include "intake/tcp_listener.h"

namespace ductus::intake {
namespace {

constexpr size_t kReadBuffer = 64 * 1024;
// How much a lingering connection reads and drops before it closes anyway.
constexpr size_t kLingerBytes = 4 << 20;

}  // namespace

// ---- ConnectionSet ----

ConnectionSet::~ConnectionSet() {
  for (StreamConnection* c : live_) {
    c->set_ = nullptr;
    c->closeNow();
  }
}

bool ConnectionSet::statusOk(int status, std::string_view name) {
  if (status >= 0) return true;
  spdlog::warn("{}: accepting a connection failed: {}", name, uv_strerror(status));
  return false;
}

bool ConnectionSet::admit(uv_stream_t* server, StreamConnection* c, std::string_view name) {
  if (int rc = uv_tcp_init(server->loop, &c->tcp_); rc < 0) {
    spdlog::warn("{}: uv_tcp_init for a new connection failed: {}", name, uv_strerror(rc));
    delete c;  // libuv never saw it
    return false;
  }
  c->set_ = this;
  live_.insert(c);
  if (int rc = uv_accept(server, c->stream()); rc < 0) {
    spdlog::warn("{}: accepting a connection failed: {}", name, uv_strerror(rc));
    c->closeNow();
    return false;
  }
  c->start();
  return true;
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
  maybeClosed();
}

void ConnectionSet::maybeClosed() {
  if (!closing_ || !live_.empty() || !onClosed_) return;
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

void StreamConnection::start() {
  sockaddr_storage ss{};
  int len = sizeof ss;
  if (uv_tcp_getpeername(&tcp_, reinterpret_cast<sockaddr*>(&ss), &len) == 0)
    peer_ = formatAddress(ss);
  // Answers are small and the peer waits for each: Nagle would only delay them.
  uv_tcp_nodelay(&tcp_, 1);
  readBuf_ = std::make_unique<char[]>(kReadBuffer);
  startReading();
}

void StreamConnection::closeWhenIdle() {
  if (!busy_) return closeNow();
  draining_ = true;
  stopReading();
}

void StreamConnection::closeNow() {
  if (closing_) return;
  closing_ = true;
  if (auto s = inflight_.lock()) s->conn_ = nullptr;
  uv_close(reinterpret_cast<uv_handle_t*>(&tcp_), &StreamConnection::onClose);
}

void StreamConnection::onClose(uv_handle_t* h) {
  auto* self = static_cast<StreamConnection*>(h->data);
  if (self->set_) self->set_->closed(self);
  delete self;
}

void StreamConnection::onAlloc(uv_handle_t* h, size_t, uv_buf_t* buf) {
  auto* self = static_cast<StreamConnection*>(h->data);
  *buf = uv_buf_init(self->readBuf_.get(), kReadBuffer);
}

void StreamConnection::onRead(uv_stream_t* s, ssize_t n, const uv_buf_t* buf) {
  auto* self = static_cast<StreamConnection*>(s->data);
  if (n == 0) return;  // EAGAIN
  if (n > 0) return self->consume(buf->base, static_cast<size_t>(n));
  // Lingering after an error answer: the peer has closed (or reset); done.
  if (self->shutdown_) return self->closeNow();
  if (n != UV_EOF) {
    self->failed(IoStep::Read, static_cast<int>(n));
    return self->closeNow();
  }
  // A peer may close its side while it waits for the answer to its last
  // request: that request, and any after it already read, are answered
  // first.
  if (self->busy_ || !self->pending_.empty()) {
    self->eofSeen_ = true;
    self->stopReading();
  } else {
    self->endOfInput();
  }
}

void StreamConnection::onWrite(uv_write_t* req, int status) {
  std::unique_ptr<WriteReq> w(reinterpret_cast<WriteReq*>(req));
  auto* self = static_cast<StreamConnection*>(req->handle->data);
  // ECANCELED: the connection is being closed; nothing failed.
  if (status < 0 && status != UV_ECANCELED) {
    self->failed(IoStep::Write, status);
    self->closeNow();
  }
}

void StreamConnection::onShutdown(uv_shutdown_t* req, int status) {
  std::unique_ptr<uv_shutdown_t> owned(req);
  auto* self = static_cast<StreamConnection*>(req->handle->data);
  if (self->closing_) return;
  if (status < 0 || !self->lingerAfterShutdown_) return self->closeNow();
  self->startReading();  // read and drop until the peer closes
}

void StreamConnection::startReading() {
  if (reading_ || closing_) return;
  if (int rc = uv_read_start(stream(), &onAlloc, &onRead); rc < 0) {
    failed(IoStep::StartRead, rc);
    closeNow();
    return;
  }
  reading_ = true;
}

void StreamConnection::stopReading() {
  if (!reading_) return;
  uv_read_stop(stream());
  reading_ = false;
}

void StreamConnection::consume(const char* p, size_t n) {
  if (shutdown_) {
    lingered_ += n;
    if (lingered_ > kLingerBytes) closeNow();
    return;
  }
  if (busy_) {
    pending_.append(p, n);
    if (pending_.size() >= pendingLimit_) stopReading();
    return;
  }
  size_t used = feedAll(p, n);
  if (closing_ || shutdown_) return;
  if (used < n) pending_.append(p + used, n - used);
  if (busy_ && pending_.size() >= pendingLimit_) stopReading();
}

size_t StreamConnection::feedAll(const char* p, size_t n) {
  size_t used = 0;
  feeding_ = true;
  while (!busy_ && !closing_ && !shutdown_ && used < n) used += feed(p + used, n - used);
  feeding_ = false;
  return used;
}

void StreamConnection::drainPending() {
  size_t used = feedAll(pending_.data(), pending_.size());
  pending_.erase(0, used);
}

void StreamConnection::beginRequest(const std::shared_ptr<AnswerSlot>& slot) {
  slot->conn_ = this;
  inflight_ = slot;
  busy_ = true;
}

void StreamConnection::endRequest(std::string answer, bool keepOpen) {
  inflight_.reset();
  busy_ = false;
  write(std::move(answer));
  if (closing_) return;
  if (!keepOpen || draining_) return shutdownAndClose(false);
  // Answered from inside feed(): the loop on the stack goes on.
  if (feeding_) return;
  drainPending();
  if (busy_ || closing_ || shutdown_) return;
  if (eofSeen_) return endOfInput();
  startReading();
}

void StreamConnection::endOfInput() {
  inputEnded();
  shutdownAndClose(false);
}

void StreamConnection::write(std::string bytes) {
  if (closing_ || shutdown_) return;
  auto w = std::make_unique<WriteReq>();
  w->data = std::move(bytes);
  uv_buf_t b = uv_buf_init(w->data.data(), w->data.size());
  if (int rc = uv_write(&w->req, stream(), &b, 1, &onWrite); rc < 0) {
    failed(IoStep::Write, rc);
    closeNow();
    return;
  }
  w.release();  // freed in onWrite
}

void StreamConnection::shutdownAndClose(bool linger) {
  if (closing_ || shutdown_) return;
  shutdown_ = true;
  // A closing listener waits for this connection: no lingering then.
  lingerAfterShutdown_ = linger && !draining_;
  stopReading();
  auto req = std::make_unique<uv_shutdown_t>();
  if (uv_shutdown(req.get(), stream(), &onShutdown) < 0) return closeNow();
  req.release();  // freed in onShutdown
}

}  // namespace ductus::intake
