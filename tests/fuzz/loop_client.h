// One client connection per fuzz input, on the same libuv loop as the
// listener under test, in the fuzzer's own thread: connect to
// 127.0.0.1:port, write the input (in pieces, the loop turning between them
// so the server reads them apart), half-close, and run the loop until the
// server has closed its side and freed the connection. What the server sent
// comes back. A server that neither answers nor closes within the bound is
// a bug (a peer that half-closed must always get its answers and an EOF),
// reported as a check failure rather than left to libFuzzer's timeout.
//
// Each connection binds its own source address in 127.0.0.0/8 (127.2.x.y),
// because the client closes first and leaves a TIME_WAIT behind: at a few
// thousand connections a second, one source address would run out of
// ephemeral ports within a minute.
#pragma once

#include <uv.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "tests/fuzz/fuzz_support.h"

namespace ductus::fuzz {

class LoopClient {
 public:
  // How long a connection may take from connect to the server's close.
  static constexpr uint64_t kBoundMs = 5000;

  struct Result {
    std::string received;  // everything the server wrote
    bool reset = false;    // the server reset the connection (or closed it unread) instead of closing it
  };

  // `live` says how many connections the server still holds; the exchange
  // ends when it is 0 after the server's EOF.
  static Result exchange(uv_loop_t* loop, uint16_t port, const std::vector<std::string_view>& pieces,
                         const std::function<size_t()>& live) {
    static uint32_t counter = 0;
    LoopClient c(loop);
    uint32_t n = counter++;
    char source[32];
    std::snprintf(source, sizeof source, "127.2.%u.%u", (n / 250) % 250 + 1, n % 250 + 1);
    sockaddr_in from{}, to{};
    uv_ip4_addr(source, 0, &from);
    uv_ip4_addr("127.0.0.1", port, &to);

    FUZZ_CHECK(uv_tcp_init(loop, &c.tcp_) == 0, "uv_tcp_init");
    c.tcp_.data = &c;
    int rc = uv_tcp_bind(&c.tcp_, reinterpret_cast<const sockaddr*>(&from), 0);
    FUZZ_CHECK(rc == 0, std::string("binding the client to ") + source + ": " + uv_strerror(rc));
    uv_tcp_nodelay(&c.tcp_, 1);
    c.connect_.data = &c;
    rc = uv_tcp_connect(&c.connect_, &c.tcp_, reinterpret_cast<const sockaddr*>(&to),
                        [](uv_connect_t* req, int status) {
                          auto* self = static_cast<LoopClient*>(req->data);
                          self->connectStatus_ = status;
                          self->connected_ = true;
                        });
    FUZZ_CHECK(rc == 0, std::string("uv_tcp_connect: ") + uv_strerror(rc));
    c.runUntil([&] { return c.connected_; }, "connecting");
    FUZZ_CHECK(c.connectStatus_ == 0,
               std::string("connecting to the listener: ") + uv_strerror(c.connectStatus_));

    uv_read_start(
        reinterpret_cast<uv_stream_t*>(&c.tcp_),
        [](uv_handle_t* h, size_t, uv_buf_t* buf) {
          auto* self = static_cast<LoopClient*>(h->data);
          *buf = uv_buf_init(self->readBuf_, sizeof self->readBuf_);
        },
        [](uv_stream_t* s, ssize_t n, const uv_buf_t* buf) {
          auto* self = static_cast<LoopClient*>(s->data);
          if (n > 0) {
            self->result_.received.append(buf->base, static_cast<size_t>(n));
          } else if (n < 0) {
            if (n != UV_EOF) self->result_.reset = true;
            self->eof_ = true;
            uv_read_stop(s);
          }
        });

    // Each piece is written once the one before it has gone; the loop then
    // turns once more without blocking, so the server reads it on its own.
    for (std::string_view piece : pieces) {
      if (c.result_.reset) break;
      if (piece.empty()) continue;
      bool written = false;
      int writeStatus = 0;
      uv_write_t req;
      struct Done {
        bool* written;
        int* status;
      } done{&written, &writeStatus};
      req.data = &done;
      uv_buf_t b = uv_buf_init(const_cast<char*>(piece.data()), static_cast<unsigned>(piece.size()));
      rc = uv_write(&req, reinterpret_cast<uv_stream_t*>(&c.tcp_), &b, 1,
                    [](uv_write_t* r, int status) {
                      auto* d = static_cast<Done*>(r->data);
                      *d->written = true;
                      *d->status = status;
                    });
      if (rc == 0) c.runUntil([&] { return written; }, "writing the input");
      if (rc != 0 || writeStatus != 0) {
        c.result_.reset = true;  // the server closed without reading it all
        break;
      }
      uv_run(loop, UV_RUN_NOWAIT);
    }

    // Half-close even after the server's EOF: a server that answered an
    // error and shut down lingers, reading, until its peer closes too.
    if (!c.result_.reset) {
      uv_shutdown_t sd;
      bool shut = false;
      sd.data = &shut;
      if (uv_shutdown(&sd, reinterpret_cast<uv_stream_t*>(&c.tcp_),
                      [](uv_shutdown_t* r, int) { *static_cast<bool*>(r->data) = true; }) == 0)
        c.runUntil([&] { return shut; }, "half-closing");
    }
    c.runUntil([&] { return c.eof_; }, "waiting for the server to answer and close");
    c.runUntil([&] { return live() == 0; }, "waiting for the server to free the connection");
    return std::move(c.result_);
  }

 private:
  explicit LoopClient(uv_loop_t* loop) : loop_(loop) {}
  ~LoopClient() {
    // The handle must be closed (and its callback run) before this object goes.
    if (!uv_is_closing(reinterpret_cast<uv_handle_t*>(&tcp_)))
      uv_close(reinterpret_cast<uv_handle_t*>(&tcp_), [](uv_handle_t* h) {
        static_cast<LoopClient*>(h->data)->closed_ = true;
      });
    while (!closed_) uv_run(loop_, UV_RUN_ONCE);
  }

  // Turns the loop until done() or the bound is over (a check failure).
  template <class F>
  void runUntil(F done, const char* what) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kBoundMs);
    uv_timer_t timer;
    uv_timer_init(loop_, &timer);
    // The timer only wakes a blocked uv_run; the deadline check decides.
    uv_timer_start(&timer, [](uv_timer_t*) {}, 50, 50);
    bool timedOut = false;
    while (!done()) {
      if (std::chrono::steady_clock::now() > deadline) {
        timedOut = true;
        break;
      }
      uv_run(loop_, UV_RUN_ONCE);
    }
    bool timerClosed = false;
    timer.data = &timerClosed;
    uv_close(reinterpret_cast<uv_handle_t*>(&timer),
             [](uv_handle_t* h) { *static_cast<bool*>(h->data) = true; });
    while (!timerClosed) uv_run(loop_, UV_RUN_NOWAIT);
    if (timedOut)
      fail(__FILE__, __LINE__,
           std::string("no progress within ") + std::to_string(kBoundMs) + " ms while " + what +
               "; the server sent so far: " + show(result_.received));
  }

  uv_loop_t* loop_;
  uv_tcp_t tcp_{};
  uv_connect_t connect_{};
  char readBuf_[64 * 1024];
  Result result_;
  int connectStatus_ = 0;
  bool connected_ = false;
  bool eof_ = false;
  bool closed_ = false;
};

}  // namespace ductus::fuzz
