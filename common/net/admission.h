// Who may connect to a listener: its allow: list (tls::AllowList, entries
// as written: IPv4 and IPv6 addresses, CIDR networks, host names). The
// listener asks Admission::admits right after accept, before any handshake
// or byte read; the answer is an in-memory compare, never a lookup, so a
// peer cannot make the accept path wait on DNS.
//
// Host names are resolved by one AllowNames for the engine: every distinct
// name across all lists once, with uv_getaddrinfo (libuv's thread pool, so
// the loop never blocks), at start (the engine waits for ready() before
// anything listens), then every 5 minutes, and again at once (at most once
// a minute per name) when a listener naming hosts refuses someone: a host
// that just moved gets in on its next try instead of within 5 minutes. A
// failed lookup keeps the last good addresses and is logged once, until a
// lookup of that name succeeds again. Nothing runs when no list names a
// host. All of it lives on the loop's thread.
#pragma once

#include <sys/socket.h>
#include <uv.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "common/tls/settings.h"
#include "common/uv_handle.h"

namespace ductus::net {

// One address, an IPv4-mapped IPv6 one kept as its IPv4 address, so a
// dual-stack listener's peers compare with the list's IPv4 entries.
struct IpAddress {
  int family = 0;                   // AF_INET or AF_INET6
  std::array<uint8_t, 16> bytes{};  // the first 4 for AF_INET
  bool operator==(const IpAddress&) const = default;
  auto operator<=>(const IpAddress&) const = default;
  std::string text() const;  // "10.1.2.3", "2001:db8::1"
};
// The peer's address without its port; family 0 for neither IPv4 nor IPv6.
IpAddress addressOf(const sockaddr_storage& ss);

// One allow: entry, parsed: an address is a network of its full length.
struct AllowEntry {
  std::string written;  // as in the list, for messages
  std::string name;     // a host name (lower case); empty for a network
  IpAddress network;    // host bits cleared
  int prefix = 0;       // 32/128 for one address
  bool contains(const IpAddress& a) const;
};
// "10.1.2.3", "10.20.0.0/16", "2001:db8::/32", "[::1]", "lab-gw.hospital.org".
// An error naming the entry when it is none of them (a prefix past the
// family's length, a name with characters DNS has no place for).
Result<AllowEntry> parseAllowEntry(std::string_view written);

// The engine's host names and what each resolved to last.
class AllowNames : public std::enable_shared_from_this<AllowNames> {
 public:
  using Addresses = std::vector<IpAddress>;
  using LookupDone = std::function<void(Result<Addresses>)>;
  // Resolves a name and calls done on the loop's thread (at once is fine).
  using Lookup = std::function<void(uv_loop_t*, const std::string& name, LookupDone done)>;

  struct Options {
    // Every name is looked up again this long after its last lookup.
    std::chrono::milliseconds every = std::chrono::minutes(5);
    // A refusal asks for a name again at most this often.
    std::chrono::milliseconds afterRefusal = std::chrono::minutes(1);
    // ready() is called this long after start() at the latest, even if a
    // lookup has not answered (a DNS server that never replies must not
    // keep the engine from listening): its names admit nobody until it does.
    std::chrono::milliseconds readyWithin = std::chrono::seconds(15);
    // The clock, in milliseconds (tests inject one); default uv_now(loop).
    std::function<uint64_t()> now;
    // How a name is resolved (tests inject one); default uv_getaddrinfo.
    Lookup lookup;
  };

  static std::shared_ptr<AllowNames> make(uv_loop_t* loop) { return make(loop, Options{}); }
  static std::shared_ptr<AllowNames> make(uv_loop_t* loop, Options options);
  AllowNames(const AllowNames&) = delete;
  AllowNames& operator=(const AllowNames&) = delete;
  // Stops the timer; lookups still running find the names gone and stop.
  ~AllowNames();

  // A name some list holds (lower case). One added after start() is
  // looked up at once (start() does not wait for it).
  void add(const std::string& name);
  // Looks every name up and calls ready once each has answered (or after
  // options.readyWithin); at once when there is none. Then looks them up
  // every options.every; no timer when there is no name.
  void start(std::function<void()> ready);
  // What the timer runs: looks up each name whose last lookup is
  // options.every old by now(). Public so a test with its own clock can
  // step it.
  void tick();
  // A listener naming `name` refused someone: look it up now unless that
  // was done (or asked) within options.afterRefusal.
  void askAgain(const std::string& name);

  // The last good addresses of `name` (empty: none yet, or not a name here).
  const Addresses& addressesOf(const std::string& name) const;
  bool contains(const std::string& name, const IpAddress& a) const;
  size_t size() const { return names_.size(); }
  // Lookups started so far (for tests and the log).
  uint64_t lookups() const { return lookups_; }

 private:
  struct Name {
    Addresses addresses;
    uint64_t askedAt = 0;  // when the last lookup started
    bool asked = false;    // a lookup has started at least once
    bool inFlight = false;
    bool failing = false;  // the last lookup failed (logged once)
    bool awaited = false;  // start() waits for its first answer
  };
  AllowNames(uv_loop_t* loop, Options options);
  uint64_t now() const;
  void lookUp(const std::string& name, Name& n);
  void answered(const std::string& name, Result<Addresses> result);
  void becomeReady();
  void startTimer();  // once: every options.every while there are names

  uv_loop_t* loop_;
  Options options_;
  std::map<std::string, Name> names_;
  UvHandle<uv_timer_t> timer_;
  UvHandle<uv_timer_t> readyTimer_;
  std::function<void()> ready_;
  size_t awaiting_ = 0;  // first lookups not answered yet
  bool starting_ = false;
  bool started_ = false;
  uint64_t lookups_ = 0;
};

// One listener's allow: list.
class Admission {
 public:
  // An error naming the first entry that is not an address, network or
  // name. Names are added to `names` (needed only when the list has any).
  static Result<std::shared_ptr<Admission>> make(const tls::AllowList& list,
                                                 std::shared_ptr<AllowNames> names);

  // Whether the peer at `peer` may connect: in a network of the list or
  // among a name's last good addresses. Counts a refusal and, when the list
  // names hosts, asks for them again (AllowNames::askAgain). Never blocks.
  bool admits(const sockaddr_storage& peer);
  bool admits(const IpAddress& peer);

  // "allow: 10.1.2.3, 10.20.0.0/16, lab-gw.hospital.org (192.0.2.7)".
  std::string describe() const;
  // Connections refused so far (read by /metrics, from any thread).
  uint64_t refusals() const { return refusals_.load(std::memory_order_relaxed); }
  bool namesHosts() const { return !hostNames_.empty(); }

 private:
  Admission() = default;
  std::vector<AllowEntry> entries_;
  std::vector<std::string> hostNames_;
  std::shared_ptr<AllowNames> names_;
  std::atomic<uint64_t> refusals_{0};
};

}  // namespace ductus::net
