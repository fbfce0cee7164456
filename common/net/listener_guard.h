// What a listener checks of a connection before its protocol sees a byte
// (allow: and tls: of an MLLP or HTTP source and of the API), and what it
// counts of both for /metrics. Handed to a ConnectionSet by its listener;
// both parts are optional.
#pragma once

#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>

#include "common/tls/certificates.h"

namespace ductus::net {

// Read by the metrics on the same loop; atomics so a reader elsewhere
// (a test's thread) sees whole values.
struct ListenerCounts {
  std::atomic<uint64_t> handshakes{0};         // TLS handshakes finished and allowed
  std::atomic<uint64_t> handshakeFailures{0};  // failed, timed out, or a subject not allowed
  std::atomic<uint64_t> refused{0};            // dropped unread by allow:
};

// A TLS handshake not finished this long after accept is given up: a peer
// that opens connections and says nothing holds no slot for long.
constexpr std::chrono::milliseconds kHandshakeTimeout = std::chrono::seconds(10);

struct ListenerGuard {
  // allow:: whether a peer's address may connect, asked right after
  // accept, in memory. Empty: everyone may.
  std::function<bool(const sockaddr_storage&)> admits;
  // tls:: each connection's TLS session comes from here. Null: plain TCP.
  std::shared_ptr<tls::ServerTls> tls;
  std::shared_ptr<ListenerCounts> counts = std::make_shared<ListenerCounts>();
  std::chrono::milliseconds handshakeTimeout = kHandshakeTimeout;
};

}  // namespace ductus::net
