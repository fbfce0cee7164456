#include "common/net/curl_multi_uv.h"

#include "common/net/loop_post.h"

namespace ductus::net {

// One socket libcurl asked us to watch, with the uv_poll that watches it.
struct CurlMulti::Socket {
  CurlMulti* owner;
  curl_socket_t fd;
  UvHandle<uv_poll_t> poll;
};

CurlMulti::CurlMulti(uv_loop_t* loop)
    : loop_(loop), multi_(curl_multi_init()), alive_(std::make_shared<CurlMulti*>(this)) {
  timer_ = makeTimer(loop_, this);
  curl_multi_setopt(multi_.get(), CURLMOPT_SOCKETFUNCTION, &CurlMulti::onSocket);
  curl_multi_setopt(multi_.get(), CURLMOPT_SOCKETDATA, this);
  curl_multi_setopt(multi_.get(), CURLMOPT_TIMERFUNCTION, &CurlMulti::onTimerChange);
  curl_multi_setopt(multi_.get(), CURLMOPT_TIMERDATA, this);
}

CurlMulti::~CurlMulti() {
  alive_.reset();
  // Removing the handles makes libcurl report CURL_POLL_REMOVE for their
  // sockets (closing our polls) before the multi itself goes.
  for (auto& [easy, done] : transfers_) curl_multi_remove_handle(multi_.get(), easy);
  transfers_.clear();
  multi_.reset();
  sockets_.clear();
  timer_.reset();
}

void CurlMulti::add(CURL* easy, Done done) {
  transfers_[easy] = std::move(done);
  // libcurl answers through the timer callback (timeout 0), so the
  // transfer starts on the next loop iteration and `done` never runs inside
  // add(), even for a malformed URL.
  if (curl_multi_add_handle(multi_.get(), easy) != CURLM_OK) {
    // Only misuse gets here (the handle is already in a multi).
    Done d = std::move(transfers_[easy]);
    transfers_.erase(easy);
    postToLoop(loop_, [d = std::move(d)] { d(CURLE_FAILED_INIT); });
  }
}

void CurlMulti::cancel(CURL* easy) {
  if (transfers_.erase(easy) == 0) return;
  curl_multi_remove_handle(multi_.get(), easy);
}

int CurlMulti::onSocket(CURL*, curl_socket_t s, int what, void* userp, void*) {
  auto* self = static_cast<CurlMulti*>(userp);
  if (what == CURL_POLL_REMOVE) {
    // libcurl closes the socket right after this; uv_close takes it out of
    // epoll at once, so a new socket with the same number is safe.
    self->sockets_.erase(s);
    return 0;
  }
  auto it = self->sockets_.find(s);
  if (it == self->sockets_.end()) {
    auto sock = std::make_unique<Socket>();
    sock->owner = self;
    sock->fd = s;
    sock->poll = UvHandle<uv_poll_t>::make();
    if (uv_poll_init_socket(self->loop_, sock->poll.get(), s) != 0) return -1;
    sock->poll.markInitialized();
    sock->poll->data = sock.get();
    it = self->sockets_.emplace(s, std::move(sock)).first;
  }
  int events = 0;
  if (what == CURL_POLL_IN || what == CURL_POLL_INOUT) events |= UV_READABLE;
  if (what == CURL_POLL_OUT || what == CURL_POLL_INOUT) events |= UV_WRITABLE;
  uv_poll_start(it->second->poll.get(), events, [](uv_poll_t* h, int status, int ev) {
    auto* sock = static_cast<Socket*>(h->data);
    if (!sock) return;  // closing
    int flags = 0;
    if (status < 0) {
      flags = CURL_CSELECT_ERR;
    } else {
      if (ev & UV_READABLE) flags |= CURL_CSELECT_IN;
      if (ev & UV_WRITABLE) flags |= CURL_CSELECT_OUT;
    }
    // May free `sock` (CURL_POLL_REMOVE); nothing touches it after this.
    sock->owner->socketAction(sock->fd, flags);
  });
  return 0;
}

int CurlMulti::onTimerChange(CURLM*, long timeoutMs, void* userp) {
  auto* self = static_cast<CurlMulti*>(userp);
  if (!self->timer_) return 0;
  if (timeoutMs < 0) {
    uv_timer_stop(self->timer_.get());
    return 0;
  }
  // libcurl forbids calling socket_action from inside this callback; a
  // 0 ms timer runs it on the next loop iteration instead.
  uv_timer_start(
      self->timer_.get(),
      [](uv_timer_t* t) {
        if (auto* multi = static_cast<CurlMulti*>(t->data)) {
          multi->socketAction(CURL_SOCKET_TIMEOUT, 0);
        }
      },
      static_cast<uint64_t>(timeoutMs), 0);
  return 0;
}

void CurlMulti::socketAction(curl_socket_t s, int flags) {
  int running = 0;
  curl_multi_socket_action(multi_.get(), s, flags, &running);
  collectFinished();
}

void CurlMulti::collectFinished() {
  std::weak_ptr<CurlMulti*> alive = alive_;
  int left = 0;
  while (CURLMsg* msg = curl_multi_info_read(multi_.get(), &left)) {
    if (msg->msg != CURLMSG_DONE) continue;
    CURL* easy = msg->easy_handle;
    CURLcode result = msg->data.result;  // msg is invalid after remove
    curl_multi_remove_handle(multi_.get(), easy);
    auto it = transfers_.find(easy);
    if (it == transfers_.end()) continue;
    Done done = std::move(it->second);
    transfers_.erase(it);
    done(result);
    // The callback may have destroyed the multi (and its sender).
    if (alive.expired()) return;
  }
}

}  // namespace ductus::net
