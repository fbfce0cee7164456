// allow: lists: addresses, networks, IPv4-mapped peers, host names resolved
// through the real uv_getaddrinfo, and the re-resolution schedule with an
// injected clock and lookup.
#include "common/net/admission.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "tests/support/log_capture.h"

namespace ductus::net {
namespace {

sockaddr_storage peer(const char* text, uint16_t port = 40000) {
  sockaddr_storage ss{};
  if (inet_pton(AF_INET, text, &reinterpret_cast<sockaddr_in&>(ss).sin_addr) == 1) {
    auto& in = reinterpret_cast<sockaddr_in&>(ss);
    in.sin_family = AF_INET;
    in.sin_port = htons(port);
  } else {
    auto& in6 = reinterpret_cast<sockaddr_in6&>(ss);
    EXPECT_EQ(inet_pton(AF_INET6, text, &in6.sin6_addr), 1) << text;
    in6.sin6_family = AF_INET6;
    in6.sin6_port = htons(port);
  }
  return ss;
}

IpAddress ip(const char* text) { return addressOf(peer(text)); }

std::shared_ptr<Admission> admission(std::vector<std::string> entries,
                                     std::shared_ptr<AllowNames> names = nullptr) {
  auto a =
      Admission::make(tls::AllowList{std::move(entries), "interface.yaml:3"}, std::move(names));
  EXPECT_TRUE(a) << a.error().message;
  return a ? *a : nullptr;
}

// A loop of the test's own, closed (with its handles) at the end.
struct Loop {
  uv_loop_t loop;
  Loop() { uv_loop_init(&loop); }
  ~Loop() {
    uv_run(&loop, UV_RUN_NOWAIT);
    uv_walk(
        &loop,
        [](uv_handle_t* h, void*) {
          if (!uv_is_closing(h)) uv_close(h, nullptr);
        },
        nullptr);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
  }
};

TEST(AdmissionTest, AddressesAndIpv4Networks) {
  auto a = admission({"10.1.2.3", "10.20.0.0/16", "192.168.7.9/24"});
  EXPECT_TRUE(a->admits(peer("10.1.2.3")));
  EXPECT_FALSE(a->admits(peer("10.1.2.4")));
  EXPECT_TRUE(a->admits(peer("10.20.0.1")));
  EXPECT_TRUE(a->admits(peer("10.20.255.254")));
  EXPECT_FALSE(a->admits(peer("10.21.0.1")));
  // Host bits in a network are ignored: 192.168.7.0/24.
  EXPECT_TRUE(a->admits(peer("192.168.7.200")));
  EXPECT_FALSE(a->admits(peer("192.168.8.1")));
  EXPECT_FALSE(a->admits(peer("::1")));
  EXPECT_EQ(a->refusals(), 4u);
  EXPECT_EQ(a->describe(), "allow: 10.1.2.3, 10.20.0.0/16, 192.168.7.9/24");
}

TEST(AdmissionTest, Ipv6AddressesAndNetworks) {
  auto a = admission({"2001:db8::/32", "[fe80::1]", "::1"});
  EXPECT_TRUE(a->admits(peer("2001:db8:1:2::3")));
  EXPECT_FALSE(a->admits(peer("2001:db9::1")));
  EXPECT_TRUE(a->admits(peer("fe80::1")));
  EXPECT_FALSE(a->admits(peer("fe80::2")));
  EXPECT_TRUE(a->admits(peer("::1")));
  EXPECT_FALSE(a->admits(peer("127.0.0.1")));
}

TEST(AdmissionTest, AMappedPeerCountsAsItsIpv4Address) {
  // A dual-stack listener sees IPv4 peers as ::ffff:a.b.c.d.
  auto a = admission({"127.0.0.2", "10.20.0.0/16"});
  EXPECT_TRUE(a->admits(peer("::ffff:127.0.0.2")));
  EXPECT_TRUE(a->admits(peer("::ffff:10.20.3.4")));
  EXPECT_FALSE(a->admits(peer("::ffff:127.0.0.1")));
  // And a mapped entry is its IPv4 network.
  auto b = admission({"::ffff:10.0.0.0/104"});
  EXPECT_TRUE(b->admits(peer("10.9.9.9")));
  EXPECT_FALSE(b->admits(peer("11.0.0.1")));
}

TEST(AdmissionTest, AnEmptyListAdmitsEveryone) {
  auto a = admission({});
  EXPECT_TRUE(a->admits(peer("203.0.113.5")));
  EXPECT_EQ(a->refusals(), 0u);
}

TEST(AdmissionTest, EntriesThatAreNothingAreRefusedNamingThem) {
  for (const char* bad : {"10.0.0.0/33", "2001:db8::/129", "10.0.0.1/x", "10.0.0.1/", "lab gw",
                          "lab_gw!.org", "-lab.org", "10.1.2", "a..b", "host/24", ""}) {
    auto e = parseAllowEntry(bad);
    EXPECT_FALSE(e) << bad;
    if (!e) {
      EXPECT_NE(e.error().message.find(std::string("`") + bad + "`"), std::string::npos)
          << e.error().message;
    }
  }
  auto a =
      Admission::make(tls::AllowList{{"10.0.0.1", "10.0.0.0/40"}, "interface.yaml:3"}, nullptr);
  ASSERT_FALSE(a);
  EXPECT_NE(a.error().message.find("interface.yaml:3"), std::string::npos) << a.error().message;
  // A name needs the engine's resolver.
  EXPECT_FALSE(Admission::make(tls::AllowList{{"lab-gw.hospital.org"}, ""}, nullptr));

  auto name = parseAllowEntry("Lab-GW.Hospital.org");
  ASSERT_TRUE(name);
  EXPECT_EQ(name->name, "lab-gw.hospital.org");
  EXPECT_TRUE(parseAllowEntry("0.0.0.0/0"));
}

TEST(AdmissionTest, NamesResolveThroughGetaddrinfoBeforeReady) {
  Loop l;
  auto names = AllowNames::make(&l.loop);
  auto a = admission({"10.0.0.1", "localhost"}, names);
  auto b = admission({"LOCALHOST"}, names);  // one name across lists
  EXPECT_EQ(names->size(), 1u);
  EXPECT_FALSE(a->admits(peer("127.0.0.1")));  // not resolved yet: nobody
  bool ready = false;
  names->start([&] {
    ready = true;
    uv_stop(&l.loop);
  });
  EXPECT_FALSE(ready);  // the loop resolves it
  uv_run(&l.loop, UV_RUN_DEFAULT);
  ASSERT_TRUE(ready);
  EXPECT_EQ(names->lookups(), 1u);
  EXPECT_TRUE(a->admits(peer("127.0.0.1")));
  EXPECT_TRUE(a->admits(peer("::ffff:127.0.0.1")));
  EXPECT_TRUE(b->admits(peer("127.0.0.1")));
  EXPECT_FALSE(a->admits(peer("192.0.2.1")));
  EXPECT_NE(a->describe().find("localhost (127.0.0.1"), std::string::npos) << a->describe();
}

TEST(AdmissionTest, NoNamesIsReadyAtOnceWithNoTimer) {
  Loop l;
  auto names = AllowNames::make(&l.loop);
  auto a = admission({"10.0.0.1"}, names);
  bool ready = false;
  names->start([&] { ready = true; });
  EXPECT_TRUE(ready);
  EXPECT_EQ(names->lookups(), 0u);
  EXPECT_EQ(uv_loop_alive(&l.loop), 0);  // nothing left to run
}

// A lookup the test answers, and a clock it sets.
struct Script {
  uint64_t nowMs = 1'000'000;
  struct Pending {
    std::string name;
    AllowNames::LookupDone done;
  };
  std::deque<Pending> pending;

  AllowNames::Options options() {
    AllowNames::Options o;
    o.now = [this] { return nowMs; };
    o.lookup = [this](uv_loop_t*, const std::string& name, AllowNames::LookupDone done) {
      pending.push_back({name, std::move(done)});
    };
    return o;
  }
  void answer(AllowNames::Addresses as) {
    ASSERT_FALSE(pending.empty());
    auto p = std::move(pending.front());
    pending.pop_front();
    p.done(std::move(as));
  }
  void fail() {
    ASSERT_FALSE(pending.empty());
    auto p = std::move(pending.front());
    pending.pop_front();
    p.done(Error{"Temporary failure in name resolution", ErrorKind::Unavailable});
  }
};

TEST(AdmissionTest, NamesAreLookedUpAgainEveryFiveMinutes) {
  Loop l;
  Script s;
  auto names = AllowNames::make(&l.loop, s.options());
  auto a = admission({"lab-gw.hospital.org"}, names);
  bool ready = false;
  names->start([&] { ready = true; });
  ASSERT_EQ(s.pending.size(), 1u);
  EXPECT_FALSE(ready);  // the engine waits for the first answer
  s.answer({ip("192.0.2.7")});
  EXPECT_TRUE(ready);
  EXPECT_TRUE(a->admits(peer("192.0.2.7")));

  s.nowMs += 4 * 60'000;
  names->tick();
  EXPECT_TRUE(s.pending.empty());  // not due yet
  s.nowMs += 60'000;
  names->tick();
  ASSERT_EQ(s.pending.size(), 1u);  // 5 minutes after the last
  names->tick();
  EXPECT_EQ(s.pending.size(), 1u);  // one at a time per name
  s.answer({ip("192.0.2.8")});
  EXPECT_FALSE(a->admits(peer("192.0.2.7")));  // it moved
  EXPECT_TRUE(a->admits(peer("192.0.2.8")));
  EXPECT_EQ(names->lookups(), 2u);
}

TEST(AdmissionTest, ARefusalLooksNamesUpAgainAtMostOnceAMinute) {
  Loop l;
  Script s;
  auto names = AllowNames::make(&l.loop, s.options());
  auto a = admission({"10.0.0.0/8", "lab-gw.hospital.org"}, names);
  auto plain = admission({"10.0.0.1"}, names);
  names->start(nullptr);
  s.answer({ip("192.0.2.7")});
  EXPECT_EQ(names->lookups(), 1u);

  // Within a minute of the last lookup: nothing asked.
  s.nowMs += 30'000;
  EXPECT_FALSE(a->admits(peer("192.0.2.9")));
  EXPECT_TRUE(s.pending.empty());
  // Past it: the refusal asks at once.
  s.nowMs += 31'000;
  EXPECT_FALSE(a->admits(peer("192.0.2.9")));
  ASSERT_EQ(s.pending.size(), 1u);
  EXPECT_FALSE(a->admits(peer("192.0.2.9")));  // in flight: not again
  s.answer({ip("192.0.2.9")});
  EXPECT_TRUE(a->admits(peer("192.0.2.9")));  // the host that moved gets in
  // More refusals within the minute ask nothing.
  s.nowMs += 10'000;
  EXPECT_FALSE(a->admits(peer("198.51.100.1")));
  EXPECT_TRUE(s.pending.empty());
  // A listener without names never asks.
  s.nowMs += 120'000;
  EXPECT_FALSE(plain->admits(peer("198.51.100.1")));
  EXPECT_TRUE(s.pending.empty());
  // Admitted peers never ask either.
  EXPECT_TRUE(a->admits(peer("10.1.1.1")));
  EXPECT_TRUE(s.pending.empty());
  EXPECT_EQ(names->lookups(), 2u);
  EXPECT_EQ(a->refusals(), 4u);
}

TEST(AdmissionTest, ANameAddedAfterStartIsLookedUpAtOnceAndKeptCurrent) {
  Loop l;
  Script s;
  auto names = AllowNames::make(&l.loop, s.options());
  bool ready = false;
  names->start([&] { ready = true; });
  EXPECT_TRUE(ready);  // no names yet
  EXPECT_EQ(uv_loop_alive(&l.loop), 0);
  // A listener bound again later, its list naming a host.
  auto a = admission({"lab-gw.hospital.org"}, names);
  ASSERT_EQ(s.pending.size(), 1u);
  s.answer({ip("192.0.2.7")});
  EXPECT_TRUE(a->admits(peer("192.0.2.7")));
  EXPECT_NE(uv_loop_alive(&l.loop), 0);  // the 5-minute timer runs now
  s.nowMs += 5 * 60'000;
  names->tick();
  EXPECT_EQ(s.pending.size(), 1u);
  s.answer({ip("192.0.2.7")});
}

// The lookup failure tests' start: lab-gw.hospital.org allowed, its first
// lookup answered with `first`, the log captured from before it.
struct LookedUpOnce {
  test::LogCapture log;
  Loop l;
  Script s;
  std::shared_ptr<AllowNames> names = AllowNames::make(&l.loop, s.options());
  std::shared_ptr<Admission> a = admission({"lab-gw.hospital.org"}, names);

  explicit LookedUpOnce(AllowNames::Addresses first) {
    names->start(nullptr);
    s.answer(std::move(first));
  }
  // Five minutes on: the name is looked up again.
  void nextLookup() {
    s.nowMs += 5 * 60'000;
    names->tick();
  }
};

TEST(AdmissionTest, AFailedLookupKeepsTheLastAddressesAndLogsOnce) {
  LookedUpOnce once({ip("192.0.2.7"), ip("2001:db8::7")});
  for (int i = 0; i < 3; ++i) {
    once.nextLookup();
    once.s.fail();
    EXPECT_TRUE(once.a->admits(peer("192.0.2.7")));
    EXPECT_TRUE(once.a->admits(peer("2001:db8::7")));
  }
  EXPECT_EQ(once.log.count("looking up lab-gw.hospital.org failed"), 1u) << once.log.all();
  EXPECT_NE(once.log.all().find("its last addresses stay (192.0.2.7, 2001:db8::7)"),
            std::string::npos)
      << once.log.all();
  // Back: logged, and a later failure is logged again.
  once.nextLookup();
  once.s.answer({ip("192.0.2.7")});
  once.nextLookup();
  once.s.fail();
  EXPECT_EQ(once.log.count("looking up lab-gw.hospital.org failed"), 2u) << once.log.all();
  EXPECT_TRUE(once.a->admits(peer("192.0.2.7")));
}

// A lookup that answers with no address at all fails as an error does:
// the last addresses stay, and the log says why.
TEST(AdmissionTest, AnAnswerWithoutAddressesIsAFailedLookup) {
  LookedUpOnce once({ip("192.0.2.7")});
  once.nextLookup();
  once.s.answer({});
  EXPECT_TRUE(once.a->admits(peer("192.0.2.7")));
  EXPECT_EQ(once.log.count("looking up lab-gw.hospital.org failed (no addresses)"), 1u)
      << once.log.all();
}

TEST(AdmissionTest, AFirstLookupThatNeverAnswersStillMakesItReady) {
  Loop l;
  Script s;
  auto options = s.options();
  options.now = nullptr;  // the loop's clock, for the ready timer
  options.readyWithin = std::chrono::milliseconds(50);
  auto names = AllowNames::make(&l.loop, options);
  auto a = admission({"lab-gw.hospital.org"}, names);
  bool ready = false;
  names->start([&] {
    ready = true;
    uv_stop(&l.loop);
  });
  uv_run(&l.loop, UV_RUN_DEFAULT);
  EXPECT_TRUE(ready);
  EXPECT_FALSE(a->admits(peer("192.0.2.7")));
  // Its late answer still counts.
  s.answer({ip("192.0.2.7")});
  EXPECT_TRUE(a->admits(peer("192.0.2.7")));
}

TEST(AdmissionTest, ALookupAnsweringAfterTheNamesAreGoneIsIgnored) {
  Loop l;
  Script s;
  auto names = AllowNames::make(&l.loop, s.options());
  names->add("lab-gw.hospital.org");
  names->start(nullptr);
  names.reset();
  s.answer({ip("192.0.2.7")});  // no crash, nothing to update
}

}  // namespace
}  // namespace ductus::net
