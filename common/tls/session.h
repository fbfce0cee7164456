// One TLS connection's state, over memory BIOs: the caller moves bytes
// between it and the socket (a libuv stream), so TLS never blocks and
// never owns a descriptor. The same class serves the listeners (server)
// and the MLLP destinations (client).
//
//   cipher from the socket -> receive() -> plaintext (and output to send)
//   plaintext to the peer  -> send()    -> output
//   takeOutput()           -> the ciphertext to write to the socket now
#pragma once

#include <openssl/ssl.h>

#include <memory>
#include <string>
#include <string_view>

namespace ductus::tls {

struct SslFree {
  void operator()(SSL* s) const { SSL_free(s); }
};
using SslPtr = std::unique_ptr<SSL, SslFree>;

class Session {
 public:
  enum class State {
    Handshaking,  // nothing for the application yet
    Open,         // the handshake is done: plaintext flows both ways
    Closed,       // the peer sent close_notify (an ordinary end of input)
    Failed,       // a TLS error: reason() says what; close the connection
  };

  // `ssl` is set up by its maker (certificates.h: ServerTls::session,
  // ClientTls::session) as server or client; the session attaches the BIOs.
  explicit Session(SslPtr ssl);
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // A client begins: its ClientHello goes to the output.
  void start();
  // Ciphertext from the peer. Plaintext it carries is appended to `plain`;
  // handshake messages, alerts and tickets to send go to the output.
  State receive(std::string_view cipher, std::string& plain);
  // Encrypts application data into the output (only while Open).
  void send(std::string_view plain);
  // A close_notify into the output.
  void close();
  // The ciphertext to write to the socket, taken (empty when none).
  std::string takeOutput();
  bool hasOutput() const;

  State state() const { return state_; }
  // Why the session failed, for a log line: "no certificate from the
  // client", "certificate verify failed (unable to get local issuer
  // certificate)", "unsupported protocol (the peer offered TLSv1.1 at
  // most)", "not TLS (the peer sent plain text)".
  const std::string& reason() const { return reason_; }
  // "TLSv1.3" once open.
  std::string version() const;
  // The peer's certificate (null without one); owned by the session.
  X509* peerCertificate() const;
  SSL* ssl() const { return ssl_.get(); }

  // Marks the session failed with a reason of the caller's (a client
  // certificate whose subject is not allowed).
  void fail(std::string reason);

 private:
  void afterIo(int rc);
  void drive(std::string& plain);

  SslPtr ssl_;
  BIO* in_ = nullptr;   // the peer's ciphertext, owned by ssl_
  BIO* out_ = nullptr;  // ciphertext for the peer, owned by ssl_
  State state_ = State::Handshaking;
  std::string reason_;
  bool sawAnyByte_ = false;
};

}  // namespace ductus::tls
