#include "common/tls/session.h"

#include <openssl/err.h>

namespace ductus::tls {
namespace {

// OpenSSL's reason for the last failure, in words an operator can act on.
std::string describeFailure(SSL* ssl, bool sawAnyByte) {
  unsigned long e = ERR_peek_last_error();
  std::string reason;
  if (e != 0) {
    const char* r = ERR_reason_error_string(e);
    reason = r ? r : "error " + std::to_string(e);
    int code = ERR_GET_REASON(e);
    if (code == SSL_R_CERTIFICATE_VERIFY_FAILED || code == SSL_R_TLSV1_ALERT_UNKNOWN_CA ||
        code == SSL_R_SSLV3_ALERT_BAD_CERTIFICATE) {
      long v = SSL_get_verify_result(ssl);
      if (v != X509_V_OK) reason += " (" + std::string(X509_verify_cert_error_string(v)) + ")";
    } else if (code == SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE) {
      reason = "no certificate from the client (this listener requires one)";
    } else if (code == SSL_R_UNSUPPORTED_PROTOCOL || code == SSL_R_WRONG_VERSION_NUMBER ||
               code == SSL_R_TLSV1_ALERT_PROTOCOL_VERSION) {
      reason += " (TLS 1.2 and 1.3 only)";
    } else if (code == SSL_R_HTTP_REQUEST || code == SSL_R_HTTPS_PROXY_REQUEST) {
      reason = "not TLS (the peer sent plain HTTP)";
    }
  } else if (!sawAnyByte) {
    reason = "the peer closed before the handshake";
  } else {
    reason = "the handshake failed";
  }
  ERR_clear_error();
  return reason;
}

}  // namespace

Session::Session(SslPtr ssl) : ssl_(std::move(ssl)) {
  in_ = BIO_new(BIO_s_mem());
  out_ = BIO_new(BIO_s_mem());
  // An empty read BIO means "want more", not end of file.
  BIO_set_mem_eof_return(in_, -1);
  BIO_set_mem_eof_return(out_, -1);
  SSL_set_bio(ssl_.get(), in_, out_);  // ssl_ owns both from here
}

void Session::start() {
  ERR_clear_error();
  int rc = SSL_do_handshake(ssl_.get());
  afterIo(rc);
}

void Session::afterIo(int rc) {
  if (rc > 0) return;
  int err = SSL_get_error(ssl_.get(), rc);
  switch (err) {
    case SSL_ERROR_WANT_READ:
    case SSL_ERROR_WANT_WRITE:
      return;
    case SSL_ERROR_ZERO_RETURN:
      state_ = State::Closed;
      return;
    default:
      if (state_ != State::Failed) {
        state_ = State::Failed;
        reason_ = describeFailure(ssl_.get(), sawAnyByte_);
      }
  }
}

void Session::drive(std::string& plain) {
  if (state_ == State::Handshaking) {
    ERR_clear_error();
    int rc = SSL_do_handshake(ssl_.get());
    if (rc == 1) {
      state_ = State::Open;
    } else {
      afterIo(rc);
      if (state_ != State::Open) return;
    }
  }
  char buf[16384];
  while (state_ == State::Open) {
    ERR_clear_error();
    int n = SSL_read(ssl_.get(), buf, sizeof buf);
    if (n > 0) {
      plain.append(buf, static_cast<size_t>(n));
      continue;
    }
    afterIo(n);
    break;
  }
}

Session::State Session::receive(std::string_view cipher, std::string& plain) {
  if (state_ == State::Failed || state_ == State::Closed) return state_;
  if (!cipher.empty()) sawAnyByte_ = true;
  while (!cipher.empty()) {
    int n = BIO_write(in_, cipher.data(), static_cast<int>(std::min<size_t>(cipher.size(), 1 << 20)));
    if (n <= 0) break;
    cipher.remove_prefix(static_cast<size_t>(n));
  }
  drive(plain);
  return state_;
}

void Session::send(std::string_view plain) {
  if (state_ != State::Open) return;
  while (!plain.empty()) {
    ERR_clear_error();
    int n = SSL_write(ssl_.get(), plain.data(), static_cast<int>(std::min<size_t>(plain.size(), 1 << 20)));
    if (n <= 0) {
      afterIo(n);
      return;
    }
    plain.remove_prefix(static_cast<size_t>(n));
  }
}

void Session::close() {
  if (state_ != State::Open && state_ != State::Closed) return;
  ERR_clear_error();
  SSL_shutdown(ssl_.get());
  ERR_clear_error();
}

std::string Session::takeOutput() {
  std::string out;
  size_t pending = BIO_ctrl_pending(out_);
  if (pending == 0) return out;
  out.resize(pending);
  int n = BIO_read(out_, out.data(), static_cast<int>(pending));
  out.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return out;
}

bool Session::hasOutput() const { return BIO_ctrl_pending(out_) > 0; }

std::string Session::version() const { return SSL_get_version(ssl_.get()); }

X509* Session::peerCertificate() const { return SSL_get0_peer_certificate(ssl_.get()); }

void Session::fail(std::string reason) {
  state_ = State::Failed;
  reason_ = std::move(reason);
}

}  // namespace ductus::tls
