// MllpSender: the MLLP client of an MLLP destination. It keeps one TCP
// connection to the receiver and re-opens it with the next send after it
// drops; messages go one at a time (<VT> message <FS><CR>) and each waits
// for its ACK, which decides the outcome:
//   AA / CA          -> Sent
//   AE / CE          -> Transient (the receiver asked for a retry)
//   AR / CR          -> Permanent (the receiver refused the message)
// Refused or timed-out connects, write errors, a peer that closes before
// the ACK, an ACK that does not come within ackTimeout, and bytes that are
// not an MLLP-framed ACK are Transient, and the connection is dropped so
// the retry starts on a clean stream. An output holding an MLLP framing byte
// (0x0B, 0x1C) is never framed: Permanent "output contains MLLP framing
// bytes ...", nothing written (the receiver would read two messages).
//
// With TLS (settings.tls), the connect step ends with a handshake (the
// host name verified against the server's certificate, the client
// certificate presented) within sendTimeout, and frames and ACKs go
// through the session. A refused handshake is Transient, worded for an
// operator: "TLS handshake with lab:2575 failed: certificate verify failed
// (...)". A peer closing without close_notify is an ordinary close.
#pragma once

#include <uv.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "common/tls/certificates.h"
#include "common/tls/session.h"
#include "common/uv_handle.h"
#include "supervisor/delivery/senders/sender.h"

namespace ductus::senders {

struct MllpSenderSettings {
  std::string host;  // a name (resolved on libuv's pool) or an IP literal
  uint16_t port = 0;
  std::chrono::milliseconds connectTimeout{10'000};
  // The framed message must be handed to the kernel within this.
  std::chrono::milliseconds sendTimeout{30'000};
  // After the write: the whole ACK must arrive within this.
  std::chrono::milliseconds ackTimeout{30'000};
  // An ACK is a few hundred bytes; anything past this is not one.
  size_t maxAckBytes = 64 * 1024;
  // Null: plain TCP. Else each connection is a TLS session for `host`.
  std::shared_ptr<tls::ClientTls> tls;
};

// Maps one ACK message (without MLLP framing) to an outcome. MSA-1 and
// MSA-3 are read whole with the field separator from the ACK's own MSH
// (MSH-1; an MSH-2 we could not use does not matter), segments end in CR
// (LF and CRLF are accepted too). Anything without an MSH and an MSA with a
// known code is Transient ("unreadable ACK").
SendOutcome outcomeOfAck(std::string_view ack);

class MllpSender final : public Sender {
 public:
  MllpSender(uv_loop_t* loop, MllpSenderSettings settings);
  ~MllpSender() override;
  MllpSender(const MllpSender&) = delete;
  MllpSender& operator=(const MllpSender&) = delete;

  // Requests queue up and go one at a time, in the order given.
  void send(SendRequest request, SendCallback cb) override;
  // In-flight and queued requests answer Transient "sender closed".
  void close(std::function<void()> done) override;

  bool connected() const { return tcp_ && connected_; }

 private:
  enum class Phase {
    Idle,       // nothing in flight
    Resolving,  // getaddrinfo for a host name
    Connecting,
    Handshaking,  // TLS: connected, the handshake not done yet
    Writing,    // framed message handed to uv_write, not yet done
    AwaitingAck,
  };
  struct Pending {
    SendRequest request;
    SendCallback cb;
  };
  struct ResolveReq;
  struct ConnectReq;
  struct WriteReq;

  void pump();
  void startConnect();
  void connectTo(const sockaddr* addr);
  void onConnected(int status);
  void startHandshake();
  void startWrite();
  // Hands bytes to the socket; `completesSend`: the framed message, whose
  // completion moves Writing to AwaitingAck (else TLS records of our own).
  void writeRaw(std::string bytes, bool completesSend);
  void flushTls();
  void failTls(const std::string& reason);
  void onWritten(int status);
  void onRead(ssize_t nread, const uv_buf_t* buf);
  // What the peer sent (plaintext with TLS); nread < 0: a libuv error or EOF.
  void onBytes(ssize_t nread, const char* data);
  void armTimer(std::chrono::milliseconds after, std::string why);
  // Drops the connection (if any) and answers the current request.
  void fail(std::string detail);
  void finish(SendOutcome outcome);
  void dropConnection();
  std::string endpoint() const;

  uv_loop_t* loop_;
  MllpSenderSettings settings_;
  UvHandle<uv_tcp_t> tcp_;
  bool connected_ = false;
  std::unique_ptr<tls::Session> session_;  // with TLS, the connection's
  bool tlsAnswered_ = false;  // plaintext came back: the handshake held on both sides
  UvHandle<uv_timer_t> timer_;
  std::string timerWhy_;
  Phase phase_ = Phase::Idle;
  std::deque<Pending> queue_;
  std::optional<Pending> current_;
  std::string ackBuffer_;
  std::array<char, 4096> readBuffer_;
  // Bumped whenever the request in flight ends or the connection drops, so
  // a libuv request that completes late (cancelled write, stale connect)
  // knows it no longer speaks for anything.
  uint64_t epoch_ = 0;
  bool closed_ = false;
  // Guards against `this` going away inside a user callback or before a
  // libuv request completes.
  std::shared_ptr<MllpSender*> alive_;
};

}  // namespace ductus::senders
