#include "supervisor/delivery/senders/mllp_sender.h"

#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>

#include "common/hl7/message.h"
#include "common/hl7/mllp.h"
#include "common/net/loop_post.h"

namespace ductus::senders {
namespace {

using hl7::mllp::kCarriageReturn;
using hl7::mllp::kEndBlock;
using hl7::mllp::kStartBlock;

// A bounded, printable excerpt of bytes that were not what we expected, so
// last_error shows what the receiver sent without dumping binary into logs.
std::string excerpt(std::string_view bytes, size_t max = 200) {
  std::string out;
  for (size_t i = 0; i < bytes.size() && i < max; ++i) {
    unsigned char c = static_cast<unsigned char>(bytes[i]);
    if (c == '\r') {
      out += "\\r";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c < 0x20 || c == 0x7f) {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  if (bytes.size() > max) out += "...";
  return out;
}

std::string uvError(std::string_view what, int status) {
  return std::string(what) + ": " + uv_strerror(status);
}

}  // namespace

SendOutcome outcomeOfAck(std::string_view ack) {
  // The ACK's own MSH comes first (blank lines aside) and gives the field
  // separator, whatever the message we sent used; anything before it means
  // this is not an ACK.
  std::string_view fromMsh = ack.substr(std::min(ack.find_first_not_of("\r\n"), ack.size()));
  auto view = hl7::MessageView::parseFieldsOnly(fromMsh);
  if (!view || !fromMsh.starts_with("MSH"))
    return SendOutcome::transient("unreadable ACK (no MSH): " + excerpt(ack));
  if (view->segment("MSA").empty())
    return SendOutcome::transient("unreadable ACK (no MSA): " + excerpt(ack));
  std::string_view code = view->get("MSA.1");
  std::string_view text = view->get("MSA.3");
  std::string detail(code);
  if (!text.empty()) detail += ": " + excerpt(text);
  if (code == "AA" || code == "CA") return SendOutcome::sent(text.empty() ? "" : detail);
  if (code == "AE" || code == "CE") return SendOutcome::transient(detail);
  if (code == "AR" || code == "CR") return SendOutcome::permanent(detail);
  return SendOutcome::transient("unreadable ACK (MSA-1 \"" + excerpt(code, 20) + "\")");
}

// Each libuv request carries the sender's liveness token and the epoch it
// was started in; its callback frees it and acts only if both still hold.
struct MllpSender::ResolveReq {
  uv_getaddrinfo_t req;
  std::weak_ptr<MllpSender*> owner;
  uint64_t epoch;
};
struct MllpSender::ConnectReq {
  uv_connect_t req;
  std::weak_ptr<MllpSender*> owner;
  uint64_t epoch;
};
struct MllpSender::WriteReq {
  uv_write_t req;
  std::weak_ptr<MllpSender*> owner;
  uint64_t epoch;
  std::string frame;  // must live until the write completes
  bool completesSend = true;
};

MllpSender::MllpSender(uv_loop_t* loop, MllpSenderSettings settings)
    : loop_(loop), settings_(std::move(settings)), alive_(std::make_shared<MllpSender*>(this)) {
  timer_ = makeTimer(loop_, this);
}

MllpSender::~MllpSender() {
  alive_.reset();
  tcp_.reset();
  timer_.reset();
}

std::string MllpSender::endpoint() const {
  bool v6 = settings_.host.find(':') != std::string::npos;
  return (v6 ? "[" + settings_.host + "]" : settings_.host) + ":" + std::to_string(settings_.port);
}

void MllpSender::send(SendRequest request, SendCallback cb) {
  if (closed_) {
    net::postToLoop(loop_,
                    [cb = std::move(cb)] { cb(SendOutcome::transient("sender closed")); });
    return;
  }
  queue_.push_back({std::move(request), std::move(cb)});
  // Start from the loop, never from inside send(): the first step may fail
  // synchronously and the caller must not be re-entered.
  if (!current_ && queue_.size() == 1) {
    std::weak_ptr<MllpSender*> owner = alive_;
    net::postToLoop(loop_, [owner] {
      if (auto self = owner.lock()) (*self)->pump();
    });
  }
}

void MllpSender::pump() {
  if (closed_ || current_ || queue_.empty()) return;
  current_ = std::move(queue_.front());
  queue_.pop_front();
  ackBuffer_.clear();
  // Framed as it is, the receiver would read what follows a framing byte as
  // a message of its own: refused before anything is written, and Permanent,
  // since the same output would be refused again.
  if (auto s = hl7::mllp::refuseFramingBytes(current_->request.payload, "output"); !s) {
    finish(SendOutcome::permanent(s.error().message));
    return;
  }
  if (connected()) {
    startWrite();
  } else {
    startConnect();
  }
}

void MllpSender::armTimer(std::chrono::milliseconds after, std::string why) {
  timerWhy_ = std::move(why);
  uv_timer_start(
      timer_.get(),
      [](uv_timer_t* t) {
        if (auto* self = static_cast<MllpSender*>(t->data)) self->fail(self->timerWhy_);
      },
      static_cast<uint64_t>(after.count()), 0);
}

void MllpSender::startConnect() {
  dropConnection();
  armTimer(settings_.connectTimeout, "connect " + endpoint() + ": no connection within " +
                                         std::to_string(settings_.connectTimeout.count()) + " ms");
  // IP literals skip the resolver.
  sockaddr_storage addr{};
  if (uv_ip4_addr(settings_.host.c_str(), settings_.port, reinterpret_cast<sockaddr_in*>(&addr)) ==
          0 ||
      uv_ip6_addr(settings_.host.c_str(), settings_.port, reinterpret_cast<sockaddr_in6*>(&addr)) ==
          0) {
    connectTo(reinterpret_cast<const sockaddr*>(&addr));
    return;
  }
  phase_ = Phase::Resolving;
  auto r = std::make_unique<ResolveReq>();
  r->owner = alive_;
  r->epoch = epoch_;
  r->req.data = r.get();
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  std::string port = std::to_string(settings_.port);
  int rc = uv_getaddrinfo(
      loop_, &r->req,
      [](uv_getaddrinfo_t* req, int status, addrinfo* res) {
        std::unique_ptr<ResolveReq> r(static_cast<ResolveReq*>(req->data));
        std::unique_ptr<addrinfo, void (*)(addrinfo*)> list(res, uv_freeaddrinfo);
        auto owner = r->owner.lock();
        if (!owner) return;
        MllpSender* self = *owner;
        if (r->epoch != self->epoch_ || self->phase_ != Phase::Resolving) return;
        if (status < 0 || !res) {
          self->fail(uvError("resolve " + self->settings_.host, status < 0 ? status : UV_EAI_NONAME));
          return;
        }
        self->connectTo(res->ai_addr);
      },
      settings_.host.c_str(), port.c_str(), &hints);
  if (rc < 0) {
    fail(uvError("resolve " + settings_.host, rc));
    return;
  }
  r.release();  // freed in the callback
}

void MllpSender::connectTo(const sockaddr* addr) {
  phase_ = Phase::Connecting;
  tcp_ = UvHandle<uv_tcp_t>::make();
  int rc = uv_tcp_init(loop_, tcp_.get());
  if (rc < 0) {
    tcp_ = {};
    fail(uvError("socket for " + endpoint(), rc));
    return;
  }
  tcp_.markInitialized();
  tcp_->data = this;
  // One small message, then wait for a small ACK: Nagle would only add
  // latency to every round trip.
  uv_tcp_nodelay(tcp_.get(), 1);
  auto c = std::make_unique<ConnectReq>();
  c->owner = alive_;
  c->epoch = epoch_;
  c->req.data = c.get();
  rc = uv_tcp_connect(&c->req, tcp_.get(), addr, [](uv_connect_t* req, int status) {
    std::unique_ptr<ConnectReq> c(static_cast<ConnectReq*>(req->data));
    auto owner = c->owner.lock();
    if (!owner) return;
    MllpSender* self = *owner;
    if (c->epoch != self->epoch_ || self->phase_ != Phase::Connecting) return;
    self->onConnected(status);
  });
  if (rc < 0) {
    fail(uvError("connect " + endpoint(), rc));
    return;
  }
  c.release();  // freed in the callback (which libuv always runs)
}

void MllpSender::onConnected(int status) {
  if (status < 0) {
    fail(uvError("connect " + endpoint(), status));
    return;
  }
  connected_ = true;
  int rc = uv_read_start(
      reinterpret_cast<uv_stream_t*>(tcp_.get()),
      [](uv_handle_t* h, size_t, uv_buf_t* buf) {
        // One buffer serves every read: each read is consumed before the
        // next. A closed handle's data is null; hand libuv nothing then.
        auto* self = static_cast<MllpSender*>(h->data);
        *buf = self ? uv_buf_init(self->readBuffer_.data(), self->readBuffer_.size())
                    : uv_buf_init(nullptr, 0);
      },
      [](uv_stream_t* s, ssize_t nread, const uv_buf_t* buf) {
        if (auto* self = static_cast<MllpSender*>(s->data)) self->onRead(nread, buf);
      });
  if (rc < 0) {
    fail(uvError("read from " + endpoint(), rc));
    return;
  }
  if (settings_.tls) {
    startHandshake();
  } else {
    startWrite();
  }
}

void MllpSender::startHandshake() {
  tls::SslPtr ssl = settings_.tls->session(settings_.host);
  if (!ssl) {
    fail("TLS with " + endpoint() + ": the client's TLS settings could not be built");
    return;
  }
  session_ = std::make_unique<tls::Session>(std::move(ssl));
  tlsAnswered_ = false;
  phase_ = Phase::Handshaking;
  armTimer(settings_.sendTimeout, "TLS handshake with " + endpoint() + ": not done within " +
                                      std::to_string(settings_.sendTimeout.count()) + " ms");
  session_->start();
  if (session_->state() == tls::Session::State::Failed) {
    failTls(session_->reason());
    return;
  }
  flushTls();
}

void MllpSender::failTls(const std::string& reason) {
  // Until plaintext came back the handshake may still be refused: TLS 1.3
  // servers judge the client certificate after the client thinks it is done.
  fail((tlsAnswered_ ? "TLS with " : "TLS handshake with ") + endpoint() + " failed: " + reason);
}

void MllpSender::flushTls() {
  if (session_ && session_->hasOutput()) writeRaw(session_->takeOutput(), false);
}

void MllpSender::startWrite() {
  phase_ = Phase::Writing;
  armTimer(settings_.sendTimeout, "send to " + endpoint() + ": not written within " +
                                      std::to_string(settings_.sendTimeout.count()) + " ms");
  std::string frame = hl7::mllp::frame(current_->request.payload);
  if (session_) {
    session_->send(frame);
    if (session_->state() != tls::Session::State::Open) {
      failTls(session_->reason().empty() ? "the session ended" : session_->reason());
      return;
    }
    frame = session_->takeOutput();
  }
  writeRaw(std::move(frame), true);
}

void MllpSender::writeRaw(std::string bytes, bool completesSend) {
  auto w = std::make_unique<WriteReq>();
  w->owner = alive_;
  w->epoch = epoch_;
  w->req.data = w.get();
  w->frame = std::move(bytes);
  w->completesSend = completesSend;
  uv_buf_t buf = uv_buf_init(w->frame.data(), static_cast<unsigned>(w->frame.size()));
  int rc = uv_write(&w->req, reinterpret_cast<uv_stream_t*>(tcp_.get()), &buf, 1,
                    [](uv_write_t* req, int status) {
                      std::unique_ptr<WriteReq> w(static_cast<WriteReq*>(req->data));
                      auto owner = w->owner.lock();
                      if (!owner) return;
                      MllpSender* self = *owner;
                      if (w->epoch != self->epoch_) return;
                      if (w->completesSend) {
                        if (self->phase_ == Phase::Writing) self->onWritten(status);
                        return;
                      }
                      // A TLS record of our own (handshake, alert) that
                      // could not be written: the connection is gone.
                      if (status >= 0) return;
                      if (self->phase_ == Phase::Idle) {
                        self->dropConnection();
                      } else {
                        self->fail(uvError("send to " + self->endpoint(), status));
                      }
                    });
  if (rc < 0) {
    fail(uvError("send to " + endpoint(), rc));
    return;
  }
  w.release();  // freed in the callback
}

void MllpSender::onWritten(int status) {
  if (status < 0) {
    fail(uvError("send to " + endpoint(), status));
    return;
  }
  phase_ = Phase::AwaitingAck;
  armTimer(settings_.ackTimeout, "no ACK from " + endpoint() + " within " +
                                     std::to_string(settings_.ackTimeout.count()) + " ms");
}

void MllpSender::onRead(ssize_t nread, const uv_buf_t* buf) {
  if (nread == 0) return;  // EAGAIN
  if (!session_) {
    onBytes(nread, buf->base);
    return;
  }
  if (nread < 0) {
    // Without close_notify too: an ordinary close, as over plain TCP.
    if (phase_ == Phase::Handshaking) {
      failTls(nread == UV_EOF ? "the peer closed the connection"
                              : std::string(uv_strerror(static_cast<int>(nread))));
    } else {
      onBytes(nread, nullptr);
    }
    return;
  }
  std::string plain;
  // The connection these bytes came on: a failed write or an answered
  // request may drop it below (a new session is only made asynchronously).
  const tls::Session* conn = session_.get();
  tls::Session::State state =
      session_->receive(std::string_view(buf->base, static_cast<size_t>(nread)), plain);
  flushTls();
  if (session_.get() != conn) return;  // the write failed and dropped the connection
  if (state == tls::Session::State::Failed) {
    if (phase_ == Phase::Idle) {
      dropConnection();
    } else {
      failTls(session_->reason());
    }
    return;
  }
  if (phase_ == Phase::Handshaking) {
    if (state == tls::Session::State::Open) {
      startWrite();
    } else if (state == tls::Session::State::Closed) {
      failTls("the peer closed the connection");
    }
    return;
  }
  if (!plain.empty()) {
    tlsAnswered_ = true;
    onBytes(static_cast<ssize_t>(plain.size()), plain.data());
  }
  // close_notify: the end of input, read as EOF on the connection it came on.
  if (state == tls::Session::State::Closed && session_.get() == conn) onBytes(UV_EOF, nullptr);
}

void MllpSender::onBytes(ssize_t nread, const char* data) {
  const bool waiting = phase_ == Phase::Writing || phase_ == Phase::AwaitingAck;
  if (nread < 0) {
    if (waiting) {
      fail(nread == UV_EOF ? endpoint() + " closed the connection before the ACK"
                           : uvError("read from " + endpoint(), static_cast<int>(nread)));
    } else {
      // The receiver hung up between messages (idle timeout, restart): the
      // next send re-opens.
      dropConnection();
    }
    return;
  }
  if (!waiting) {
    // Bytes nobody asked for: the stream is out of step; start afresh.
    dropConnection();
    return;
  }
  ackBuffer_.append(data, static_cast<size_t>(nread));
  // Some receivers put a newline between frames; skip it before the <VT>.
  size_t start = ackBuffer_.find_first_not_of("\r\n");
  if (start == std::string::npos) return;
  if (ackBuffer_[start] != kStartBlock) {
    fail("not an MLLP frame from " + endpoint() + ": " + excerpt(ackBuffer_));
    return;
  }
  size_t end = ackBuffer_.find(kEndBlock, start + 1);
  if (end == std::string::npos) {
    if (ackBuffer_.size() > settings_.maxAckBytes) {
      fail("ACK from " + endpoint() + " longer than " + std::to_string(settings_.maxAckBytes) +
           " bytes");
    }
    return;
  }
  if (end + 1 >= ackBuffer_.size()) return;  // the <CR> is still on its way
  if (ackBuffer_[end + 1] != kCarriageReturn) {
    fail("not an MLLP frame from " + endpoint() + " (<FS> without <CR>): " + excerpt(ackBuffer_));
    return;
  }
  SendOutcome outcome =
      outcomeOfAck(std::string_view(ackBuffer_).substr(start + 1, end - start - 1));
  // An ACK we cannot read, or bytes after it, mean the stream cannot be
  // trusted for the next message.
  bool trailing = ackBuffer_.find_first_not_of("\r\n", end + 2) != std::string::npos;
  bool unreadable = outcome.detail.rfind("unreadable ACK", 0) == 0;
  if (trailing || unreadable) dropConnection();
  finish(std::move(outcome));
}

void MllpSender::fail(std::string detail) {
  dropConnection();
  finish(SendOutcome::transient(std::move(detail)));
}

void MllpSender::finish(SendOutcome outcome) {
  if (timer_) uv_timer_stop(timer_.get());
  ++epoch_;
  phase_ = Phase::Idle;
  ackBuffer_.clear();
  if (!current_) return;
  SendCallback cb = std::move(current_->cb);
  current_.reset();
  std::weak_ptr<MllpSender*> owner = alive_;
  cb(std::move(outcome));
  // The callback may have closed or destroyed the sender.
  if (auto self = owner.lock()) (*self)->pump();
}

void MllpSender::dropConnection() {
  ++epoch_;
  connected_ = false;
  session_.reset();
  tcp_.reset();  // uv_close; pending write/connect callbacks see the new epoch
}

void MllpSender::close(std::function<void()> done) {
  closed_ = true;
  uv_loop_t* loop = loop_;  // `this` may be gone after a callback below
  std::weak_ptr<MllpSender*> owner = alive_;
  std::deque<Pending> queued;
  queued.swap(queue_);
  dropConnection();
  timer_.reset();
  if (current_) finish(SendOutcome::transient("sender closed"));
  for (auto& p : queued) p.cb(SendOutcome::transient("sender closed"));
  // Close callbacks run at the end of this loop iteration; `done` runs in
  // the next one, after them.
  if (done) net::postToLoop(loop, std::move(done));
}

}  // namespace ductus::senders
