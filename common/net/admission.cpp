#include "common/net/admission.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <utility>

#include "common/duration_text.h"
#include "common/log.h"

namespace ductus::net {
namespace {

bool allDigits(std::string_view s) {
  return !s.empty() &&
         std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
}

// A DNS host name: labels of letters, digits and inner hyphens (and '_',
// which some internal zones use), 1-63 each, 253 in all, the last not all
// digits (so "10.1.2", which getaddrinfo would read as an address, is not
// taken for a name).
bool isHostName(std::string_view s) {
  if (s.empty() || s.size() > 253) return false;
  std::string_view last;
  size_t start = 0;
  while (true) {
    size_t dot = s.find('.', start);
    std::string_view label =
        s.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
    if (label.empty() || label.size() > 63 || label.front() == '-' || label.back() == '-')
      return false;
    for (unsigned char c : label)
      if (!std::isalnum(c) && c != '-' && c != '_') return false;
    last = label;
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  return !allDigits(last);
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

IpAddress fromV4(const in_addr& a) {
  IpAddress ip;
  ip.family = AF_INET;
  std::memcpy(ip.bytes.data(), &a, 4);
  return ip;
}

IpAddress fromV6(const in6_addr& a) {
  if (IN6_IS_ADDR_V4MAPPED(&a)) {
    IpAddress ip;
    ip.family = AF_INET;
    std::memcpy(ip.bytes.data(), a.s6_addr + 12, 4);
    return ip;
  }
  IpAddress ip;
  ip.family = AF_INET6;
  std::memcpy(ip.bytes.data(), a.s6_addr, 16);
  return ip;
}

int bitsOf(int family) { return family == AF_INET ? 32 : 128; }

// Clears the bits past `prefix`.
IpAddress masked(IpAddress a, int prefix) {
  int bits = bitsOf(a.family);
  for (int i = prefix; i < bits; ++i) a.bytes[i / 8] &= static_cast<uint8_t>(~(0x80u >> (i % 8)));
  return a;
}

// Resolves with uv_getaddrinfo on libuv's thread pool; done runs on the loop.
void uvLookup(uv_loop_t* loop, const std::string& name, AllowNames::LookupDone done) {
  struct Request {
    uv_getaddrinfo_t req;
    AllowNames::LookupDone done;
  };
  auto* r = new Request{};  // freed in the callback, or below when never started
  r->done = std::move(done);
  r->req.data = r;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;  // every address the name has, IPv4 and IPv6
  hints.ai_socktype = SOCK_STREAM;
  int rc = uv_getaddrinfo(
      loop, &r->req,
      [](uv_getaddrinfo_t* req, int status, addrinfo* res) {
        std::unique_ptr<Request> r(static_cast<Request*>(req->data));
        if (status < 0) {
          if (res) uv_freeaddrinfo(res);
          r->done(Error{uv_strerror(status), ErrorKind::Unavailable});
          return;
        }
        AllowNames::Addresses out;
        for (addrinfo* ai = res; ai; ai = ai->ai_next) {
          IpAddress ip;
          if (ai->ai_family == AF_INET)
            ip = fromV4(reinterpret_cast<sockaddr_in*>(ai->ai_addr)->sin_addr);
          else if (ai->ai_family == AF_INET6)
            ip = fromV6(reinterpret_cast<sockaddr_in6*>(ai->ai_addr)->sin6_addr);
          else
            continue;
          if (std::find(out.begin(), out.end(), ip) == out.end()) out.push_back(ip);
        }
        uv_freeaddrinfo(res);
        r->done(std::move(out));
      },
      name.c_str(), nullptr, &hints);
  if (rc < 0) {
    std::unique_ptr<Request> owned(r);
    owned->done(Error{uv_strerror(rc), ErrorKind::Unavailable});
  }
}

std::string join(const AllowNames::Addresses& as) {
  std::string out;
  for (const auto& a : as) {
    if (!out.empty()) out += ", ";
    out += a.text();
  }
  return out;
}

}  // namespace

std::string IpAddress::text() const {
  char buf[INET6_ADDRSTRLEN] = {};
  if (family != AF_INET && family != AF_INET6) return "?";
  inet_ntop(family, bytes.data(), buf, sizeof buf);
  return buf;
}

IpAddress addressOf(const sockaddr_storage& ss) {
  if (ss.ss_family == AF_INET) return fromV4(reinterpret_cast<const sockaddr_in&>(ss).sin_addr);
  if (ss.ss_family == AF_INET6) return fromV6(reinterpret_cast<const sockaddr_in6&>(ss).sin6_addr);
  return {};
}

bool AllowEntry::contains(const IpAddress& a) const {
  if (!name.empty() || a.family != network.family) return false;
  return masked(a, prefix) == network;
}

Result<AllowEntry> parseAllowEntry(std::string_view written) {
  AllowEntry e;
  e.written = std::string(written);
  auto bad = [&](const std::string& why) {
    return Error{"allow: `" + e.written + "` " + why, ErrorKind::Config};
  };
  std::string_view addr = written;
  std::string_view prefixText;
  bool hasPrefix = false;
  if (size_t slash = written.find('/'); slash != std::string_view::npos) {
    addr = written.substr(0, slash);
    prefixText = written.substr(slash + 1);
    hasPrefix = true;
  }
  if (addr.size() >= 2 && addr.front() == '[' && addr.back() == ']')
    addr = addr.substr(1, addr.size() - 2);
  std::string a(addr);
  in_addr v4{};
  in6_addr v6{};
  bool mapped = false;
  if (inet_pton(AF_INET, a.c_str(), &v4) == 1) {
    e.network = fromV4(v4);
  } else if (inet_pton(AF_INET6, a.c_str(), &v6) == 1) {
    mapped = IN6_IS_ADDR_V4MAPPED(&v6);
    e.network = fromV6(v6);
  } else if (hasPrefix) {
    return bad("is not a network: `" + a + "` is not an IPv4 or IPv6 address");
  } else if (isHostName(written)) {
    e.name = lower(written);
    return e;
  } else {
    return bad("is not an address, a network (10.20.0.0/16) or a host name");
  }
  int bits = bitsOf(e.network.family);
  e.prefix = bits;
  if (hasPrefix) {
    if (!allDigits(prefixText) || prefixText.size() > 3)
      return bad("has a prefix length that is not a number");
    int p = std::stoi(std::string(prefixText));
    // ::ffff:10.0.0.0/104 is 10.0.0.0/8: peers are compared as IPv4.
    if (mapped) p -= 96;
    if (p < 0 || p > bits)
      return bad("has a prefix length past " + std::to_string(mapped ? 128 : bits) +
                 " bits, or one that covers more than IPv4-mapped addresses");
    e.prefix = p;
  }
  e.network = masked(e.network, e.prefix);
  return e;
}

// ---- AllowNames ----

std::shared_ptr<AllowNames> AllowNames::make(uv_loop_t* loop, Options options) {
  return std::shared_ptr<AllowNames>(new AllowNames(loop, std::move(options)));
}

AllowNames::AllowNames(uv_loop_t* loop, Options options)
    : loop_(loop), options_(std::move(options)) {
  if (!options_.lookup) options_.lookup = uvLookup;
}

AllowNames::~AllowNames() = default;  // the timers close with their handles

uint64_t AllowNames::now() const { return options_.now ? options_.now() : uv_now(loop_); }

void AllowNames::add(const std::string& name) {
  auto [it, added] = names_.try_emplace(name);
  // A list built after start() (a listener bound again) has its new name
  // looked up now, and kept current from here on.
  if (added && started_) {
    lookUp(it->first, it->second);
    startTimer();
  }
}

void AllowNames::startTimer() {
  if (timer_) return;
  timer_ = makeTimer(loop_, this);
  uint64_t every = static_cast<uint64_t>(options_.every.count());
  uv_timer_start(
      timer_.get(),
      [](uv_timer_t* t) {
        if (auto* self = static_cast<AllowNames*>(t->data)) self->tick();
      },
      every, every);
}

void AllowNames::start(std::function<void()> ready) {
  started_ = true;
  ready_ = std::move(ready);
  if (names_.empty()) {
    becomeReady();
    return;
  }
  // A lookup may answer at once (an injected one, or a failure to start):
  // ready waits until every name has been asked.
  starting_ = true;
  for (auto& [name, n] : names_) {
    n.awaited = true;
    ++awaiting_;
  }
  for (auto& [name, n] : names_) lookUp(name, n);
  starting_ = false;
  if (awaiting_ == 0) {
    becomeReady();
  } else if (ready_) {
    readyTimer_ = makeTimer(loop_, this);
    uv_timer_start(
        readyTimer_.get(),
        [](uv_timer_t* t) {
          auto* self = static_cast<AllowNames*>(t->data);
          if (!self) return;
          for (const auto& [name, n] : self->names_)
            if (n.awaited)
              spdlog::warn("allow: {} has not resolved within {}; it admits nobody until it does",
                           name, formatDuration(self->options_.readyWithin));
          self->becomeReady();
        },
        static_cast<uint64_t>(options_.readyWithin.count()), 0);
  }
  startTimer();
}

void AllowNames::becomeReady() {
  readyTimer_.reset();
  if (auto ready = std::exchange(ready_, nullptr)) ready();
}

void AllowNames::tick() {
  uint64_t t = now();
  uint64_t every = static_cast<uint64_t>(options_.every.count());
  // The timer and the clock may disagree by a little: a name is due a
  // twentieth of the period early rather than a whole period late.
  uint64_t slack = every / 20;
  for (auto& [name, n] : names_)
    if (!n.inFlight && (!n.asked || t + slack >= n.askedAt + every)) lookUp(name, n);
}

void AllowNames::askAgain(const std::string& name) {
  auto it = names_.find(name);
  // Before start() the first lookups are still to come.
  if (!started_ || it == names_.end()) return;
  Name& n = it->second;
  if (n.inFlight) return;
  if (n.asked && now() - n.askedAt < static_cast<uint64_t>(options_.afterRefusal.count())) return;
  lookUp(name, n);
}

void AllowNames::lookUp(const std::string& name, Name& n) {
  n.inFlight = true;
  n.asked = true;
  n.askedAt = now();
  ++lookups_;
  std::weak_ptr<AllowNames> self = weak_from_this();
  options_.lookup(loop_, name, [self, name](Result<Addresses> result) {
    // The names may be gone by the time a lookup answers (engine stopped).
    if (auto names = self.lock()) names->answered(name, std::move(result));
  });
}

void AllowNames::answered(const std::string& name, Result<Addresses> result) {
  auto it = names_.find(name);
  if (it == names_.end()) return;
  Name& n = it->second;
  n.inFlight = false;
  // An answer without addresses fails as an error does. (Not by assigning
  // an Error to `result`: GCC 12 then warns of a delete of an unallocated
  // object inside the variant, wrongly.)
  if (!result || result->empty()) {
    if (!n.failing)
      spdlog::warn(
          "allow: looking up {} failed ({}); {}", name,
          result ? std::string_view("no addresses") : std::string_view(result.error().message),
          n.addresses.empty() ? "it admits nobody until a lookup succeeds"
                              : "its last addresses stay (" + join(n.addresses) + ")");
    n.failing = true;
  } else {
    Addresses found = std::move(*result);
    std::sort(found.begin(), found.end());
    if (n.failing || found != n.addresses)
      spdlog::info("allow: {} is {}{}", name, join(found), n.failing ? " (resolving again)" : "");
    n.failing = false;
    n.addresses = std::move(found);
  }
  if (std::exchange(n.awaited, false) && --awaiting_ == 0 && !starting_) becomeReady();
}

const AllowNames::Addresses& AllowNames::addressesOf(const std::string& name) const {
  static const Addresses kNone;
  auto it = names_.find(name);
  return it == names_.end() ? kNone : it->second.addresses;
}

bool AllowNames::contains(const std::string& name, const IpAddress& a) const {
  const Addresses& as = addressesOf(name);
  return std::binary_search(as.begin(), as.end(), a);
}

// ---- Admission ----

Result<std::shared_ptr<Admission>> Admission::make(const tls::AllowList& list,
                                                   std::shared_ptr<AllowNames> names) {
  std::shared_ptr<Admission> a(new Admission());
  for (const std::string& written : list.entries) {
    auto e = parseAllowEntry(written);
    if (!e) {
      Error err = e.error();
      if (!list.at.empty()) err.message = list.at + ": " + err.message;
      return err;
    }
    if (!e->name.empty() &&
        std::find(a->hostNames_.begin(), a->hostNames_.end(), e->name) == a->hostNames_.end())
      a->hostNames_.push_back(e->name);
    a->entries_.push_back(std::move(*e));
  }
  if (!a->hostNames_.empty()) {
    if (!names) return Error{"allow: names hosts, but the engine has no resolver for them"};
    for (const std::string& n : a->hostNames_) names->add(n);
    a->names_ = std::move(names);
  }
  return a;
}

bool Admission::admits(const sockaddr_storage& peer) { return admits(addressOf(peer)); }

bool Admission::admits(const IpAddress& peer) {
  if (entries_.empty()) return true;  // no list: everyone (settings.h)
  if (peer.family == AF_INET || peer.family == AF_INET6) {
    for (const AllowEntry& e : entries_) {
      if (e.name.empty() ? e.contains(peer) : names_->contains(e.name, peer)) return true;
    }
  }
  refusals_.fetch_add(1, std::memory_order_relaxed);
  // A host that moved gets in on its next try, not in 5 minutes.
  for (const std::string& n : hostNames_) names_->askAgain(n);
  return false;
}

std::string Admission::describe() const {
  std::string out = "allow: ";
  bool first = true;
  for (const AllowEntry& e : entries_) {
    if (!first) out += ", ";
    first = false;
    out += e.written;
    if (!e.name.empty()) {
      const auto& as = names_->addressesOf(e.name);
      out += as.empty() ? " (not resolved)" : " (" + join(as) + ")";
    }
  }
  return out;
}

}  // namespace ductus::net
