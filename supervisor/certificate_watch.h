// CertificateWatch: the engine's certificates: entries kept current. Every
// minute the file-backed ones are read again on libuv's pool (never the
// loop) and compared by a hash of their contents (tls::Certificates::
// reload); a renewed pair is served to the next connection with no
// restart, one that does not load is logged once and the old one stays.
// One timer; no database work; nothing runs when no entry is file-backed.
#pragma once

#include <uv.h>

#include <chrono>
#include <memory>

#include "common/tls/certificates.h"
#include "common/uv_handle.h"

namespace ductus::supervisor {

class CertificateWatch {
 public:
  static constexpr std::chrono::milliseconds kEvery = std::chrono::minutes(1);

  CertificateWatch(uv_loop_t* loop, std::shared_ptr<tls::Certificates> certificates,
                   std::chrono::milliseconds every = kEvery);
  ~CertificateWatch();
  CertificateWatch(const CertificateWatch&) = delete;
  CertificateWatch& operator=(const CertificateWatch&) = delete;

 private:
  void check();

  uv_loop_t* loop_;
  std::shared_ptr<tls::Certificates> certificates_;
  UvHandle<uv_timer_t> timer_;
  // A check still on the pool when the watch goes: its job holds the
  // certificates and this flag, not the watch.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  bool checking_ = false;
};

}  // namespace ductus::supervisor
