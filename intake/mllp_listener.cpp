#include "intake/mllp_listener.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "common/hl7/message.h"

namespace ductus::intake {
namespace {

constexpr char kStartBlock = 0x0b;
constexpr char kEndBlock = 0x1c;
constexpr char kCarriageReturn = 0x0d;
constexpr size_t kReadBuffer = 64 * 1024;
// What a connection buffers behind the message being answered before it
// stops reading (TCP then holds the sender back). A sender that waits for
// each ACK, as MLLP asks, never gets near it, so reading is not stopped and
// restarted around every message (two epoll_ctl calls each).
constexpr size_t kPendingLimit = 1 << 20;
// What an oversized frame keeps so its AR can still echo MSH-10: the MSH
// segment is a few hundred bytes in practice.
constexpr size_t kOversizedHead = 64 * 1024;

// The MSH segment of a frame (or of its head), copied so the ACK can be
// built after the message bytes have gone to the handler.
std::string mshSegmentOf(std::string_view frame) {
  size_t at = hl7::findMsh(frame);
  if (at == std::string_view::npos) return {};
  size_t end = frame.find_first_of("\r\n", at);
  return std::string(frame.substr(at, end == std::string_view::npos ? frame.size() - at : end - at));
}

std::string answerFor(std::string_view mshSegment, hl7::AckCode code, std::string_view text) {
  auto view = hl7::MessageView::parse(mshSegment);
  if (!view) return hl7::buildAckWithoutMessage(code, text);
  return hl7::buildAck(*view, code, text);
}

}  // namespace

struct MllpAnswer::State {
  MllpConnection* conn = nullptr;  // null once answered or the connection is gone
  std::string msh;                 // the message's MSH segment, to build the ACK from
  ~State();  // answers AE if nobody answered
};

// One accepted connection. Owns itself: created on accept, deleted in its
// handle's close callback (libuv frees nothing before that callback).
class MllpConnection {
 public:
  MllpConnection(MllpListener* listener, uint64_t id) : listener_(listener) {
    peer_.connection = id;
    tcp_.data = this;
  }

  uv_tcp_t* tcp() { return &tcp_; }
  uv_stream_t* stream() { return reinterpret_cast<uv_stream_t*>(&tcp_); }

  void start() {
    sockaddr_storage ss{};
    int len = sizeof ss;
    if (uv_tcp_getpeername(&tcp_, reinterpret_cast<sockaddr*>(&ss), &len) == 0)
      peer_.address = formatAddress(ss);
    uv_tcp_nodelay(&tcp_, 1);
    readBuf_ = std::make_unique<char[]>(kReadBuffer);
    startReading();
  }

  bool busy() const { return busy_; }

  // The listener is closing: finish the message in flight, then close.
  void closeWhenIdle() {
    if (busy_) {
      closeAfterAnswer_ = true;
      uv_read_stop(stream());
    } else {
      closeNow();
    }
  }

  void closeNow() {
    if (closing_) return;
    closing_ = true;
    if (auto s = inflight_.lock()) s->conn = nullptr;
    uv_close(reinterpret_cast<uv_handle_t*>(&tcp_), &MllpConnection::onClose);
  }

  void detach() { listener_ = nullptr; }

  // Called by MllpAnswer: the handler's verdict on the message in flight.
  void answer(std::string ack) {
    inflight_.reset();
    busy_ = false;
    write(std::move(ack));
    if (closing_) return;
    if (closeAfterAnswer_ || (listener_ && listener_->closing_)) {
      shutdownAndClose();
      return;
    }
    // Answered from inside the handler: the feed loop on the stack goes on.
    if (feeding_) return;
    drainPending();
    if (busy_ || closing_ || shutdown_) return;
    if (eofAfterPending_) return closeAfterEof();
    startReading();
  }

  MllpListener* listener_;
  MllpPeer peer_;

 private:
  enum class Framing { Seeking, InFrame, AfterEnd };

  struct WriteReq {
    uv_write_t req;
    std::string data;
  };

  static void onClose(uv_handle_t* h) {
    auto* self = static_cast<MllpConnection*>(h->data);
    if (self->listener_) self->listener_->connectionClosed(self);
    delete self;
  }

  static void onAlloc(uv_handle_t* h, size_t, uv_buf_t* buf) {
    auto* self = static_cast<MllpConnection*>(h->data);
    *buf = uv_buf_init(self->readBuf_.get(), kReadBuffer);
  }

  static void onRead(uv_stream_t* s, ssize_t n, const uv_buf_t* buf) {
    auto* self = static_cast<MllpConnection*>(s->data);
    if (n == 0) return;  // EAGAIN
    if (n < 0) {
      if (n != UV_EOF) {
        spdlog::warn("{}: connection {} from {} failed: {}", self->name(),
                     self->peer_.connection, self->peer_.address, uv_strerror(static_cast<int>(n)));
        return self->closeNow();
      }
      // A sender may close its side while it waits for the ACK of its last
      // message: that message, and any after it already read, are answered
      // first.
      if (self->busy_ || !self->pending_.empty()) {
        self->eofAfterPending_ = true;
        self->stopReading();
      } else {
        self->closeAfterEof();
      }
      return;
    }
    self->consume(buf->base, static_cast<size_t>(n));
  }

  static void onWrite(uv_write_t* req, int status) {
    std::unique_ptr<WriteReq> w(reinterpret_cast<WriteReq*>(req));
    auto* self = static_cast<MllpConnection*>(req->handle->data);
    if (status < 0 && status != UV_ECANCELED && self) {
      spdlog::warn("{}: writing the ACK to {} failed: {}", self->name(), self->peer_.address,
                   uv_strerror(status));
      self->closeNow();
    }
  }

  static void onShutdown(uv_shutdown_t* req, int) {
    auto* self = static_cast<MllpConnection*>(req->handle->data);
    delete req;
    self->closeNow();
  }

  std::string_view name() const {
    return listener_ ? std::string_view(listener_->settings_.name) : std::string_view("mllp");
  }
  size_t maxMessage() const {
    return listener_ ? listener_->settings_.maxMessageBytes : size_t{64} << 20;
  }

  void startReading() {
    if (reading_ || closing_) return;
    int rc = uv_read_start(stream(), &MllpConnection::onAlloc, &MllpConnection::onRead);
    if (rc < 0) {
      spdlog::warn("{}: reading from {} failed: {}", name(), peer_.address, uv_strerror(rc));
      closeNow();
      return;
    }
    reading_ = true;
  }

  void stopReading() {
    if (!reading_) return;
    uv_read_stop(stream());
    reading_ = false;
  }

  void write(std::string data) {
    if (closing_) return;
    auto w = std::make_unique<WriteReq>();
    std::string framed;
    framed.reserve(data.size() + 3);
    framed += kStartBlock;
    framed += data;
    framed += kEndBlock;
    framed += kCarriageReturn;
    w->data = std::move(framed);
    uv_buf_t b = uv_buf_init(w->data.data(), w->data.size());
    int rc = uv_write(&w->req, stream(), &b, 1, &MllpConnection::onWrite);
    if (rc < 0) {
      spdlog::warn("{}: writing the ACK to {} failed: {}", name(), peer_.address, uv_strerror(rc));
      closeNow();
      return;
    }
    w.release();  // freed in onWrite
  }

  // The sender closed its side and everything it sent is answered. Shutdown,
  // not uv_close: an ACK may still be queued, and uv_close would cancel it.
  void closeAfterEof() {
    if (state_ == Framing::InFrame)
      spdlog::info("{}: connection {} from {} closed in the middle of a message", name(),
                   peer_.connection, peer_.address);
    shutdownAndClose();
  }

  void shutdownAndClose() {
    if (closing_ || shutdown_) return;
    shutdown_ = true;
    stopReading();
    auto* req = new uv_shutdown_t{};  // freed in onShutdown
    if (uv_shutdown(req, stream(), &MllpConnection::onShutdown) < 0) {
      delete req;
      closeNow();
    }
  }

  // Bytes just read. Frames are handled one at a time; what arrives after a
  // frame that is still being answered waits in pending_.
  void consume(const char* p, size_t n) {
    if (busy_) {
      pending_.append(p, n);
      if (pending_.size() >= kPendingLimit) stopReading();
      return;
    }
    size_t off = 0;
    feeding_ = true;
    while (!busy_ && !closing_ && off < n) off += feed(p + off, n - off);
    feeding_ = false;
    if (closing_) return;
    if (off < n) pending_.append(p + off, n - off);
    if (busy_ && pending_.size() >= kPendingLimit) stopReading();
  }

  void drainPending() {
    size_t off = 0;
    feeding_ = true;
    while (!busy_ && !closing_ && off < pending_.size())
      off += feed(pending_.data() + off, pending_.size() - off);
    feeding_ = false;
    pending_.erase(0, off);
  }

  // Advances the framing state machine; returns how many bytes it used. It
  // stops right after a frame's end so the caller can see busy_.
  size_t feed(const char* p, size_t n) {
    size_t i = 0;
    while (i < n) {
      switch (state_) {
        case Framing::Seeking: {
          const void* start = std::memchr(p + i, kStartBlock, n - i);
          size_t at = start ? static_cast<const char*>(start) - p : n;
          if (at > i) noteGarbage(at - i);
          if (!start) return n;
          i = at + 1;
          state_ = Framing::InFrame;
          frame_.clear();
          oversized_ = false;
          break;
        }
        case Framing::InFrame: {
          const void* end = std::memchr(p + i, kEndBlock, n - i);
          size_t at = end ? static_cast<const char*>(end) - p : n;
          append(p + i, at - i);
          if (!end) return n;
          i = at + 1;
          state_ = Framing::AfterEnd;
          dispatch();
          return i;
        }
        case Framing::AfterEnd:
          // 0x1C is followed by 0x0D; a sender that leaves it out is still
          // read correctly.
          state_ = Framing::Seeking;
          if (p[i] == kCarriageReturn) ++i;
          break;
      }
    }
    return i;
  }

  void append(const char* p, size_t n) {
    if (oversized_) return;
    if (frame_.size() + n > maxMessage()) {
      oversized_ = true;
      size_t keep = std::min(kOversizedHead, frame_.size() + n);
      if (frame_.size() < keep) frame_.append(p, keep - frame_.size());
      frame_.resize(keep);
      return;
    }
    frame_.append(p, n);
  }

  void noteGarbage(size_t bytes) {
    if (garbageLogged_) return;
    garbageLogged_ = true;
    spdlog::warn("{}: connection {} from {} sent {} byte(s) outside an MLLP frame; skipping "
                 "them (logged once per connection)",
                 name(), peer_.connection, peer_.address, bytes);
  }

  void dispatch() {
    std::string frame = std::move(frame_);
    frame_.clear();
    if (oversized_) {
      spdlog::warn("{}: message from {} is over the {}-byte limit; answered AR", name(),
                   peer_.address, maxMessage());
      write(answerFor(mshSegmentOf(frame), hl7::AckCode::Reject, "message too large"));
      return;
    }
    auto view = hl7::MessageView::parse(frame);
    if (!view) {
      spdlog::warn("{}: message from {} refused: {}; answered AR", name(), peer_.address,
                   view.error().message);
      write(hl7::buildAckWithoutMessage(hl7::AckCode::Reject, view.error().message));
      return;
    }
    if (!listener_) return;
    auto state = std::make_shared<MllpAnswer::State>();
    state->conn = this;
    state->msh = std::string(view->msh());
    inflight_ = state;
    busy_ = true;
    listener_->handler_(peer_, std::move(frame), MllpAnswer(std::move(state)));
  }

  uv_tcp_t tcp_{};
  std::unique_ptr<char[]> readBuf_;
  Framing state_ = Framing::Seeking;
  std::string frame_;
  std::string pending_;
  bool oversized_ = false;
  bool busy_ = false;
  bool feeding_ = false;
  bool reading_ = false;
  bool eofAfterPending_ = false;  // the sender closed; close after answering what it sent
  bool closing_ = false;
  bool closeAfterAnswer_ = false;
  bool shutdown_ = false;
  bool garbageLogged_ = false;
  std::weak_ptr<MllpAnswer::State> inflight_;
};

MllpAnswer::State::~State() {
  if (conn) conn->answer(answerFor(msh, hl7::AckCode::Error, "message was not answered"));
}

void MllpAnswer::operator()(hl7::AckCode code, std::string_view text) const {
  if (!state_ || !state_->conn) return;
  MllpConnection* c = std::exchange(state_->conn, nullptr);
  c->answer(answerFor(state_->msh, code, text));
}

bool MllpAnswer::answered() const { return !state_ || !state_->conn; }

MllpListener::MllpListener(uv_loop_t* loop, MllpSettings settings, Handler handler)
    : loop_(loop), settings_(std::move(settings)), handler_(std::move(handler)) {}

MllpListener::~MllpListener() {
  for (MllpConnection* c : connections_) {
    c->detach();
    c->closeNow();
  }
  connections_.clear();
}

TcpListen MllpListener::how() {
  return {settings_.name, "MLLP", this, &MllpListener::onConnection};
}

Status MllpListener::listen(const std::string& host, uint16_t port, int backlog) {
  return listenTcp(loop_, server_, how(), host, port, backlog);
}

Status MllpListener::adopt(int fd) { return adoptTcp(loop_, server_, how(), fd); }

std::string MllpListener::address() const { return boundAddress(server_); }

uint16_t MllpListener::port() const { return boundPort(server_); }

void MllpListener::onConnection(uv_stream_t* server, int status) {
  auto* self = static_cast<MllpListener*>(server->data);
  if (!self) return;
  if (status < 0) {
    spdlog::warn("{}: accepting a connection failed: {}", self->settings_.name,
                 uv_strerror(status));
    return;
  }
  auto* c = new MllpConnection(self, self->nextConnection_++);  // deleted in its close callback
  if (int rc = uv_tcp_init(self->loop_, c->tcp()); rc < 0) {
    spdlog::warn("{}: uv_tcp_init for a new connection failed: {}", self->settings_.name,
                 uv_strerror(rc));
    delete c;
    return;
  }
  self->connections_.insert(c);
  if (int rc = uv_accept(server, c->stream()); rc < 0) {
    spdlog::warn("{}: accepting a connection failed: {}", self->settings_.name, uv_strerror(rc));
    c->closeNow();
    return;
  }
  c->start();
  spdlog::debug("{}: connection {} from {}", self->settings_.name, c->peer_.connection,
                c->peer_.address);
}

void MllpListener::close(std::function<void()> onClosed) {
  onClosed_ = std::move(onClosed);
  closing_ = true;
  server_.reset();
  // closeWhenIdle may erase from the set via a close callback only later,
  // but iterate over a copy anyway.
  auto copy = connections_;
  for (MllpConnection* c : copy) c->closeWhenIdle();
  maybeClosed();
}

void MllpListener::connectionClosed(MllpConnection* c) {
  connections_.erase(c);
  maybeClosed();
}

void MllpListener::maybeClosed() {
  if (!closing_ || !connections_.empty() || !onClosed_) return;
  auto cb = std::move(onClosed_);
  onClosed_ = nullptr;
  cb();  // may destroy this listener: nothing after this line
}

}  // namespace ductus::intake
