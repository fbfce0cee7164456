// End to end: a real `ductus run` child process on a database of the test's
// own, real MLLP senders and receivers on 127.0.0.1, and kill -9 in the
// middle of traffic. What is asserted is the engine's invariants
// (docs/architecture.md): nothing is acknowledged before it is committed,
// nothing acknowledged is lost, order per key holds at the receiver, a route
// stores each message once.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "tests/support/e2e.h"
#include "tests/support/engine_process.h"
#include "tests/support/exit_status.h"
#include "tests/support/http_client.h"
#include "tests/support/mllp_client.h"
#include "tests/support/mllp_project.h"
#include "tests/support/mllp_receiver.h"
#include "tests/support/test_database.h"
#include "tests/support/test_env.h"

namespace ductus::test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// The first arrival of each control id, per key ("K3-7" -> key K3, seq 7),
// must come in sequence order.
void expectFirstArrivalsInOrder(const std::vector<std::string>& arrivals) {
  std::set<std::string> seen;
  std::map<std::string, int> last;
  for (auto& id : arrivals) {
    if (!seen.insert(id).second) continue;
    auto dash = id.rfind('-');
    std::string key = id.substr(0, dash);
    int seq = std::stoi(id.substr(dash + 1));
    auto it = last.find(key);
    if (it != last.end()) {
      EXPECT_LT(it->second, seq) << "key " << key << ": " << id << " arrived after seq "
                                 << it->second;
    }
    last[key] = seq;
  }
}

TEST(EngineEndToEnd, TheAckWaitsForTheCommit) {
  TestDatabase db;
  uint16_t port = freePort();
  TempProject project(MllpProject{.port = port});
  EngineProcess engine(project.root(), db.url());
  ASSERT_TRUE(engine.start());

  // Hold a lock that blocks every insert into messages.
  PGconn* locker = db.connect();
  PQclear(PQexec(locker, "BEGIN"));
  PGresult* r = PQexec(locker, "LOCK TABLE messages IN EXCLUSIVE MODE");
  ASSERT_EQ(PQresultStatus(r), PGRES_COMMAND_OK) << PQerrorMessage(locker);
  PQclear(r);

  auto c = MllpClient::connect("127.0.0.1", port);
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(c->send(hl7("HELD-1", "M1")).ok());
  // No ACK while the commit cannot happen.
  EXPECT_FALSE(c->readFrame(1500ms).ok());
  EXPECT_EQ(db.value("SELECT count(*) FROM messages"), "0");

  PQclear(PQexec(locker, "COMMIT"));
  PQfinish(locker);
  auto ack = c->readFrame(10000ms);
  ASSERT_TRUE(ack.ok()) << ack.error().message;
  auto f = readAck(*ack);
  EXPECT_EQ(f.code, "AA");
  EXPECT_EQ(f.controlId, "HELD-1");  // MSA-2 = MSH-10
  EXPECT_EQ(db.value("SELECT count(*) FROM messages"), "1");
  EXPECT_EQ(engine.terminate(), 0) << engine.log();
}

TEST(EngineEndToEnd, PerKeyOrderHoldsWhileOneKeysFirstMessageFailsThreeTimes) {
  TestDatabase db;
  MllpReceiver receiver([](const std::string& id, int times) {
    return id == "K3-0" && times < 3 ? "AE" : "AA";
  });
  uint16_t port = freePort();
  TempProject project(MllpProject{.port = port,
                                  .settings = "ordering: { key: PID.3.1, partitions: 16 }\n",
                                  .destination = mllpDestination(receiver.port())});
  EngineProcess engine(project.root(), db.url());
  ASSERT_TRUE(engine.start());

  auto c = MllpClient::connect("127.0.0.1", port);
  ASSERT_TRUE(c.ok());
  const int perKey = 12, keys = 10;
  for (int i = 0; i < perKey; ++i)
    for (int k = 0; k < keys; ++k) {
      std::string id = "K" + std::to_string(k) + "-" + std::to_string(i);
      auto ack = c->exchange(hl7(id, "MRN" + std::to_string(k)));
      ASSERT_TRUE(ack.ok());
      ASSERT_EQ(readAck(*ack).code, "AA");
    }
  // Back-offs of 1 + 2 + 4 s for K3-0.
  ASSERT_TRUE(waitFor([&] { return receiver.accepted().size() >= perKey * keys; }, 60s))
      << receiver.accepted().size() << " delivered\n" << engine.log();
  EXPECT_EQ(receiver.arrivals("K3-0"), 4);
  auto got = receiver.accepted();
  EXPECT_EQ(got.size(), static_cast<size_t>(perKey * keys));  // no duplicates in a clean run
  expectFirstArrivalsInOrder(got);
  // Statuses are flushed and settled just after the sends.
  EXPECT_TRUE(waitFor(
      [&] {
        return db.value("SELECT count(*) FROM messages WHERE status = 1") ==
               std::to_string(perKey * keys);
      },
      20s))
      << db.value("SELECT string_agg(status::text || ':' || n::text, ' ') FROM (SELECT status, "
                  "count(*) n FROM deliveries GROUP BY status) s")
      << "\n" << engine.log();
  // Three failures and the send that succeeded.
  EXPECT_EQ(db.value("SELECT attempts FROM deliveries d JOIN messages m ON m.id = d.message_id "
                     "WHERE convert_from(m.payload, 'LATIN1') LIKE '%|K3-0|%'"),
            "4");
  EXPECT_EQ(engine.terminate(), 0) << engine.log();
}

TEST(EngineEndToEnd, ADestinationThatIsDownBlocksOnlyItself) {
  TestDatabase db;
  uint16_t port = freePort();
  uint16_t nobody = 0;
  Fd refusing = closedPort(&nobody);  // held, so nothing listens there
  ASSERT_TRUE(refusing.valid());
  TempProject project(MllpProject{
      .port = port,
      .destination = "destinations:\n  archive:\n    file: { path: out/ }\n"
                     "  lab:\n    mllp: { host: 127.0.0.1, port: " +
                     std::to_string(nobody) + " }\n"});
  EngineProcess engine(project.root(), db.url());
  ASSERT_TRUE(engine.start());
  auto c = MllpClient::connect("127.0.0.1", port);
  ASSERT_TRUE(c.ok());
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(c->exchange(hl7("D-" + std::to_string(i), "M")).ok());

  fs::path out = project.root() / "out";
  auto files = [&] {
    size_t n = 0;
    if (fs::exists(out))
      for (auto& e : fs::directory_iterator(out))
        if (e.path().filename().string()[0] != '.') ++n;
    return n;
  };
  ASSERT_TRUE(waitFor([&] { return files() == 20; }, 30s)) << files() << "\n" << engine.log();
  ASSERT_TRUE(waitFor(
      [&] {
        return db.value("SELECT max(attempts) FROM deliveries d JOIN destinations t ON t.id = "
                        "d.destination_id WHERE t.name = 'lab'") >= "1";
      },
      20s));
  EXPECT_EQ(db.value("SELECT count(*) FROM deliveries d JOIN destinations t ON t.id = "
                     "d.destination_id WHERE t.name = 'lab' AND d.status = 0"),
            "20");
  EXPECT_EQ(db.value("SELECT count(*) FROM messages WHERE status = 0"), "20");
  EXPECT_NE(db.value("SELECT last_error FROM deliveries d JOIN destinations t ON t.id = "
                     "d.destination_id WHERE t.name = 'lab' AND attempts > 0 LIMIT 1"),
            "");
  EXPECT_EQ(engine.terminate(), 0) << engine.log();
}

// publish: says how a finished file gets its name, as a program watching
// the folder sees it: link (the default) as the final name's IN_CREATE and
// no rename; rename as its IN_MOVED_TO (from a hidden dot-name).
TEST(EngineEndToEnd, AFileDestinationsPublishSaysWhatAFolderWatcherSees) {
  TestDatabase db;
  uint16_t port = freePort();
  TempProject project(
      MllpProject{.port = port,
                  .destination = "destinations:\n  linked:\n    file: { path: linked/ }\n"
                                 "  renamed:\n    file: { path: renamed/, publish: rename }\n"});
  const fs::path linked = project.root() / "linked", renamed = project.root() / "renamed";
  fs::create_directories(linked);
  fs::create_directories(renamed);
  Fd watch(inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
  ASSERT_TRUE(watch.valid());
  int linkedWd = inotify_add_watch(watch.get(), linked.c_str(), IN_CREATE | IN_MOVED_TO);
  int renamedWd = inotify_add_watch(watch.get(), renamed.c_str(), IN_CREATE | IN_MOVED_TO);
  ASSERT_GE(linkedWd, 0);
  ASSERT_GE(renamedWd, 0);
  EngineProcess engine(project.root(), db.url());
  ASSERT_TRUE(engine.start());
  auto c = MllpClient::connect("127.0.0.1", port);
  ASSERT_TRUE(c.ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(c->exchange(hl7("P-" + std::to_string(i), "M")).ok());
  auto files = [](const fs::path& dir) {
    size_t n = 0;
    for (auto& e : fs::directory_iterator(dir))
      if (e.path().filename().string()[0] != '.') ++n;
    return n;
  };
  ASSERT_TRUE(waitFor([&] { return files(linked) == 3 && files(renamed) == 3; }, 30s))
      << engine.log();
  // wd -> mask -> final names (dot-names are the temporary ones)
  std::map<int, std::map<uint32_t, int>> seen;
  alignas(inotify_event) char buf[64 * 1024];
  for (ssize_t n; (n = ::read(watch.get(), buf, sizeof buf)) > 0;)
    for (char* p = buf; p < buf + n;) {
      auto* e = reinterpret_cast<inotify_event*>(p);
      if (e->len && e->name[0] != '.') ++seen[e->wd][e->mask & (IN_CREATE | IN_MOVED_TO)];
      p += sizeof(inotify_event) + e->len;
    }
  EXPECT_EQ(seen[linkedWd][IN_CREATE], 3);
  EXPECT_EQ(seen[linkedWd][IN_MOVED_TO], 0);
  EXPECT_EQ(seen[renamedWd][IN_MOVED_TO], 3);
  EXPECT_EQ(seen[renamedWd][IN_CREATE], 0);
  EXPECT_EQ(engine.terminate(), 0) << engine.log();
}

// The sweep's tests: an engine on the one-MLLP-interface project (a file
// destination, out/), sent one message.
struct SweptEngine {
  TestDatabase db;
  uint16_t port = freePort();
  TempProject project{MllpProject{.port = port}};
  EngineProcess engine{project.root(), db.url()};

  void startAndSend(const std::string& controlId) {
    ASSERT_TRUE(engine.start());
    auto c = MllpClient::connect("127.0.0.1", port);
    ASSERT_TRUE(c.ok());
    ASSERT_TRUE(c->exchange(hl7(controlId, "M")).ok());
  }
};

// A wake can be lost only by a bug, or by a change made behind the engine's
// back: the engine's sweep (every 30 s, one statement for every loop) finds
// what waits and wakes its loops; no loop reads its own queue on a timer.
TEST(EngineEndToEnd, ADeliveryMadePendingBehindTheEnginesBackIsSentByTheSweep) {
  SweptEngine swept;
  ASSERT_NO_FATAL_FAILURE(swept.startAndSend("SWEPT-1"));
  TestDatabase& db = swept.db;
  EngineProcess& engine = swept.engine;
  fs::path out = swept.project.root() / "out";
  auto files = [&] {
    std::vector<fs::path> found;
    if (fs::exists(out))
      for (auto& e : fs::directory_iterator(out))
        if (e.path().filename().string()[0] != '.') found.push_back(e.path());
    return found;
  };
  ASSERT_TRUE(waitFor([&] { return files().size() == 1; }, 20s)) << engine.log();
  ASSERT_TRUE(waitFor(
      [&] { return db.value("SELECT count(*) FROM messages WHERE status = 0") == "0"; }, 20s));
  fs::remove(files()[0]);
  // Pending again, with no wake: only the sweep can find it.
  db.value("UPDATE deliveries SET status = 0");
  db.value("UPDATE messages SET status = 0");
  ASSERT_TRUE(waitFor([&] { return files().size() == 1; }, 45s))
      << "the delivery made pending again was never read\n"
      << engine.log();
  EXPECT_EQ(engine.terminate(), 0) << engine.log();
}

// A message left pending with every delivery done: what a statement that
// committed after the engine's start and is none of its loops' leaves (a
// killed engine's route, say, whose backend outlived it). Nothing pending
// in the queue, so no loop reads it; the sweep settles it.
TEST(EngineEndToEnd, AMessageLeftPendingWithEveryDeliveryDoneIsSettledByTheSweep) {
  SweptEngine swept;
  ASSERT_NO_FATAL_FAILURE(swept.startAndSend("LEFT-1"));
  TestDatabase& db = swept.db;
  EngineProcess& engine = swept.engine;
  auto status = [&] { return db.value("SELECT string_agg(status::text, ',') FROM messages"); };
  ASSERT_TRUE(waitFor([&] { return status() == "1"; }, 20s)) << status() << "\n" << engine.log();
  db.value("UPDATE messages SET status = 0");
  ASSERT_TRUE(waitFor([&] { return status() == "1"; }, 45s))
      << "the message left pending was never settled: " << status() << "\n"
      << engine.log();
  EXPECT_NE(engine.log().find("1 message(s) left pending with every delivery done are settled"),
            std::string::npos)
      << engine.log();
  EXPECT_EQ(db.value("SELECT string_agg(status::text, ',') FROM deliveries"), "1");
  EXPECT_EQ(engine.terminate(), 0) << engine.log();
}

TEST(EngineEndToEnd, KillNineMidTrafficLosesNothingAcknowledgedAndKeepsOrder) {
  TestDatabase db;
  MllpReceiver receiver;
  uint16_t port = freePort();
  TempProject project(MllpProject{.port = port,
                                  .settings = "ordering: { key: PID.3.1, partitions: 16 }\n"
                                              "dedupe: { key: MSH.10 }\n",
                                  .destination = mllpDestination(receiver.port())});
  EngineProcess engine(project.root(), db.url());
  ASSERT_TRUE(engine.start());

  const int senders = 4, each = 300;
  std::vector<std::vector<std::string>> acked(senders);  // each sender's own; read after join
  std::atomic<size_t> total{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  struct Joiner {
    std::atomic<bool>& stop;
    std::vector<std::thread>& threads;
    ~Joiner() {
      stop = true;
      for (auto& th : threads)
        if (th.joinable()) th.join();
    }
  } joiner{stop, threads};
  for (int t = 0; t < senders; ++t) {
    std::vector<std::pair<std::string, std::string>> msgs;
    for (int i = 0; i < each; ++i) {
      std::string id = "T" + std::to_string(t) + "-" + std::to_string(i);
      msgs.emplace_back(id, hl7(id, "MRN" + std::to_string(t)));
    }
    threads.emplace_back([&, t, msgs] { sendAll(port, msgs, acked[t], stop, &total); });
  }
  ASSERT_TRUE(waitFor([&] { return total >= 300 && receiver.accepted().size() >= 100; }, 60s));
  engine.kill9();
  size_t atKill = total;
  EXPECT_LT(atKill, static_cast<size_t>(senders * each))
      << "every message was acknowledged before the kill; nothing was tested";
  ASSERT_TRUE(engine.start());
  for (auto& th : threads) th.join();
  ASSERT_EQ(total, static_cast<size_t>(senders * each));

  // Every acknowledged message reaches the receiver at least once.
  ASSERT_TRUE(waitFor(
      [&] {
        auto got = receiver.accepted();
        return std::set<std::string>(got.begin(), got.end()).size() >=
               static_cast<size_t>(senders * each);
      },
      90s))
      << engine.log();
  auto got = receiver.accepted();
  std::set<std::string> delivered(got.begin(), got.end());
  for (auto& a : acked)
    for (auto& id : a) EXPECT_TRUE(delivered.count(id)) << id << " was acknowledged, never delivered";
  expectFirstArrivalsInOrder(got);
  EXPECT_EQ(engine.terminate(), 0) << engine.log();
}

// A fan-out to 25 file destinations killed in the middle (sync: group, the
// default): no final name holds a partial file, every delivery marked sent
// has its file, and after a restart every message reaches every folder.
TEST(EngineEndToEnd, AKillNineMidFanOutLeavesNoPartialFileAndNoSentDeliveryWithoutItsFile) {
  TestDatabase db;
  uint16_t port = freePort();
  const int dests = 25, total = 300;
  std::string destinations = "destinations:\n";
  for (int d = 1; d <= dests; ++d)
    destinations += "  d" + std::to_string(d) + ":\n    file: { path: out/d" + std::to_string(d) +
                    "/, name: \"{id}.hl7\" }\n";
  TempProject project(MllpProject{.port = port, .destination = destinations});
  EngineProcess engine(project.root(), db.url());
  ASSERT_TRUE(engine.start());
  std::map<std::string, std::string> sentText;  // control id -> the message
  std::vector<std::pair<std::string, std::string>> msgs;
  for (int i = 0; i < total; ++i) {
    std::string id = "F-" + std::to_string(i);
    msgs.emplace_back(id, hl7(id, "MRN" + std::to_string(i % 7)));
    sentText[id] = msgs.back().second;
  }
  std::vector<std::string> acked;
  std::atomic<size_t> acks{0};
  std::atomic<bool> stop{false};
  std::thread sender([&] { sendAll(port, msgs, acked, stop, &acks); });
  struct Joiner {
    std::atomic<bool>& stop;
    std::thread& t;
    ~Joiner() {
      stop = true;
      if (t.joinable()) t.join();
    }
  } joiner{stop, sender};
  auto sentCount = [&] {
    return std::stoll("0" + db.value("SELECT count(*) FROM deliveries WHERE status = 1"));
  };
  ASSERT_TRUE(waitFor([&] { return sentCount() >= 1000; }, 60s)) << engine.log();
  engine.kill9();
  long long atKill = sentCount();
  EXPECT_LT(atKill, static_cast<long long>(total) * dests)
      << "everything was delivered before the kill";

  // Every file under a final name is whole, and every delivery marked sent
  // has its file.
  auto checkFolders = [&](const char* when) {
    std::map<std::string, std::set<std::string>> names;  // folder -> final names
    for (auto& e : std::filesystem::recursive_directory_iterator(project.root() / "out")) {
      if (!e.is_regular_file()) continue;
      std::string name = e.path().filename().string();
      if (name[0] == '.') continue;  // a temporary file: never a final name
      names[e.path().parent_path().filename().string()].insert(name);
      std::string text = fileText(e.path());
      std::string controlId = text.substr(0, text.find('\r'));
      controlId = controlId.substr(controlId.find("ADT^A01|") + 8);
      controlId = controlId.substr(0, controlId.find('|'));
      auto expected = sentText.find(controlId);
      ASSERT_NE(expected, sentText.end())
          << when << ": " << e.path() << " holds " << text.size() << " bytes";
      EXPECT_EQ(text, expected->second) << when << ": " << e.path() << " is not the whole message";
    }
    std::string rows = db.value(
        "SELECT string_agg(t.name || '/' || d.message_id || '.hl7', ' ') FROM deliveries d JOIN "
        "destinations t "
        "ON t.id = d.destination_id WHERE d.status = 1");
    std::istringstream sent(rows);
    size_t missing = 0;
    for (std::string path; sent >> path;) {
      auto slash = path.find('/');
      if (!names[path.substr(0, slash)].count(path.substr(slash + 1))) ++missing;
    }
    EXPECT_EQ(missing, 0u) << when << ": deliveries marked sent without their file";
  };
  checkFolders("after the kill");

  ASSERT_TRUE(engine.start());
  sender.join();
  ASSERT_TRUE(waitFor(
      [&] { return db.value("SELECT count(*) FROM deliveries WHERE status = 0") == "0"; }, 120s))
      << engine.log();
  checkFolders("after the restart");
  for (int d = 1; d <= dests; ++d) {
    size_t files = 0;
    for (auto& e :
         std::filesystem::directory_iterator(project.root() / "out" / ("d" + std::to_string(d))))
      files += e.path().filename().string()[0] != '.';
    EXPECT_GE(files, acked.size()) << "d" << d;
  }
  EXPECT_EQ(engine.terminate(), 0) << engine.log();
  // After a clean stop every message whose 25 deliveries are done is
  // settled too: none is left pending for the next start.
  EXPECT_EQ(db.value("SELECT count(*) FROM messages WHERE status = 0"), "0");
}

TEST(EngineEndToEnd, ARouteStoresEachMessageOnceAcrossAKillNine) {
  TestDatabase db;
  uint16_t port = freePort();
  TempProject project({
      {"ductus.yaml", engineYaml()},
      {"interfaces/front/interface.yaml",
       "source:\n  mllp: { listen: 127.0.0.1:" + std::to_string(port) +
           " }\nformat: hl7v2\ndestination:\n  interface: back\n"},
      {"interfaces/front/transform.js", kPassThrough},
      {"interfaces/back/interface.yaml",
       "source:\n  internal: {}\nformat: hl7v2\ndestination:\n  file: { path: out/ }\n"},
      {"interfaces/back/transform.js", kPassThrough},
  });
  EngineProcess engine(project.root(), db.url());
  ASSERT_TRUE(engine.start());
  std::vector<std::string> acked;  // the sender's; read after join
  std::atomic<size_t> total{0};
  std::atomic<bool> stop{false};
  std::vector<std::pair<std::string, std::string>> msgs;
  // Enough that the sender is still sending when 50 have been routed: with
  // the database in memory, 400 were all acknowledged first.
  for (int i = 0; i < 2000; ++i)
    msgs.emplace_back("R-" + std::to_string(i), hl7("R-" + std::to_string(i), "M"));
  std::vector<std::thread> threads;
  struct Joiner {
    std::atomic<bool>& stop;
    std::vector<std::thread>& threads;
    ~Joiner() {
      stop = true;
      for (auto& th : threads)
        if (th.joinable()) th.join();
    }
  } joiner{stop, threads};
  threads.emplace_back([&] { sendAll(port, msgs, acked, stop, &total); });
  auto routed = [&] {
    return std::stoll("0" + db.value("SELECT count(*) FROM messages m JOIN interfaces i ON i.id = "
                                     "m.interface_id WHERE i.name = 'back'"));
  };
  ASSERT_TRUE(waitFor([&] { return routed() >= 50; }, 60s)) << engine.log();
  engine.kill9();
  EXPECT_LT(total.load(), msgs.size())
      << "every message was acknowledged before the kill; nothing was tested";
  ASSERT_TRUE(engine.start());
  threads.front().join();
  // Messages acknowledged twice (no dedupe here) are two messages; what
  // must hold is one routed copy per front message.
  std::string fronts = db.value(
      "SELECT count(*) FROM messages m JOIN interfaces i ON i.id = m.interface_id WHERE i.name = "
      "'front' AND m.status <> 4");
  ASSERT_TRUE(waitFor([&] { return std::to_string(routed()) == fronts; }, 60s))
      << routed() << " routed of " << fronts << "\n" << engine.log();
  EXPECT_EQ(db.value("SELECT count(*) - count(DISTINCT origin_id) FROM messages m JOIN interfaces "
                     "i ON i.id = m.interface_id WHERE i.name = 'back'"),
            "0");
  EXPECT_EQ(db.value("SELECT count(*) FROM messages m JOIN interfaces i ON i.id = m.interface_id "
                     "WHERE i.name = 'back' AND m.origin_id IS NULL"),
            "0");
  EXPECT_EQ(engine.terminate(), 0) << engine.log();
}

// A one-shot HTTP server answering every request with `status`.
class FixedHttpServer {
 public:
  explicit FixedHttpServer(int status) : status_(status) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    listen(fd_, 16);
    socklen_t len = sizeof a;
    getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] {
      while (!stop_) {
        pollfd p{fd_, POLLIN, 0};
        if (poll(&p, 1, 100) <= 0) continue;
        int c = accept(fd_, nullptr, nullptr);
        std::string req;
        char buf[4096];
        ssize_t n;
        while (req.find("\r\n\r\n") == std::string::npos && (n = read(c, buf, sizeof buf)) > 0)
          req.append(buf, n);
        std::string resp = "HTTP/1.1 " + std::to_string(status_) +
                           " Not Found\r\nContent-Length: 9\r\nConnection: close\r\n\r\nnot found";
        (void)!write(c, resp.data(), resp.size());
        close(c);
      }
    });
  }
  ~FixedHttpServer() {
    stop_ = true;
    thread_.join();
    close(fd_);
  }
  uint16_t port() const { return port_; }

 private:
  int status_;
  int fd_;
  uint16_t port_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

TEST(EngineEndToEnd, AnHttp404QuarantinesTheMessageWithTheStatusInLastError) {
  TestDatabase db;
  FixedHttpServer http(404);
  uint16_t port = freePort();
  TempProject project(MllpProject{.port = port,
                                  .destination = "destination:\n  http: { url: \"http://127.0.0.1:" +
                                                 std::to_string(http.port()) + "/in\" }\n"});
  EngineProcess engine(project.root(), db.url());
  ASSERT_TRUE(engine.start());
  auto c = MllpClient::connect("127.0.0.1", port);
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(c->exchange(hl7("H-1", "M")).ok());
  ASSERT_TRUE(waitFor([&] { return db.value("SELECT status FROM messages") == "3"; }, 30s))
      << engine.log();
  EXPECT_NE(db.value("SELECT last_error FROM deliveries").find("404"), std::string::npos)
      << db.value("SELECT last_error FROM deliveries");
  EXPECT_EQ(engine.terminate(), 0) << engine.log();
  // Nothing retries a quarantined message: the operator is told, with why.
  const std::string id = db.value("SELECT id FROM messages");
  EXPECT_NE(engine.log().find("adt/default: message " + id + " quarantined: HTTP 404"),
            std::string::npos)
      << engine.log();
}

TEST(EngineEndToEnd, AFileOf100000CsvRecordsKilledHalfwayResumesWithoutLossOrDoubles) {
  TestDatabase db;
  TempProject project({
      {"ductus.yaml", engineYaml()},
      {"interfaces/csv/interface.yaml",
       "source:\n  file: { path: in/, pattern: \"*.csv\", split: records, move_to: done/, "
       "poll: 200ms }\nformat: csv\ndurability: relaxed\ndestination:\n  file: { path: out/ }\n"
       "  output: json\n"},
      // Filtered: this test is about intake, not 100,000 output files.
      {"interfaces/csv/transform.js", "export function transform() { return null; }\n"},
  });
  const int rows = 100000;
  {
    std::string csv = "order_id,mrn,note\n";
    for (int i = 0; i < rows; ++i)
      csv += std::to_string(i) + ",MRN" + std::to_string(i % 97) + ",\"a note, with \"\"quotes\"\"\n and a newline " +
             std::to_string(i) + "\"\n";
    fs::create_directories(project.root() / "in");
    // Written under a dot-name, then renamed: the poller never sees half a file.
    std::ofstream(project.root() / "in" / ".orders.tmp", std::ios::binary) << csv;
    fs::rename(project.root() / "in" / ".orders.tmp", project.root() / "in" / "orders.csv");
  }
  EngineProcess engine(project.root(), db.url());
  ASSERT_TRUE(engine.start());
  auto stored = [&] { return std::stoll("0" + db.value("SELECT count(*) FROM messages")); };
  ASSERT_TRUE(waitFor([&] { return stored() >= 20000; }, 120s)) << engine.log();
  engine.kill9();
  long long atKill = stored();
  EXPECT_LT(atKill, rows) << "the file was read completely before the kill; nothing was tested";
  EXPECT_TRUE(fs::exists(project.root() / "in" / "orders.csv"));  // not acknowledged yet
  ASSERT_TRUE(engine.start());
  ASSERT_TRUE(waitFor([&] { return fs::exists(project.root() / "done" / "orders.csv"); }, 120s))
      << engine.log();
  EXPECT_EQ(db.value("SELECT count(*) FROM messages"), std::to_string(rows));
  EXPECT_EQ(db.value("SELECT count(DISTINCT payload) FROM messages"), std::to_string(rows));
  // Every record carries the header.
  EXPECT_EQ(db.value("SELECT count(*) FROM messages WHERE convert_from(payload, 'UTF8') NOT LIKE "
                     "'order_id,mrn,note%'"),
            "0");
  // Batches of at most 500 records, each its own transaction (one read of
  // the file holds thousands of these rows).
  EXPECT_EQ(db.value("SELECT max(n) <= 500 FROM (SELECT count(*) AS n FROM messages "
                     "GROUP BY xmin::text) t"),
            "t");
  EXPECT_EQ(engine.terminate(), 0) << engine.log();
}

TEST(EngineEndToEnd, HttpQueueModeAnswers202WithTheIdAfterTheCommit) {
  TestDatabase db;
  uint16_t port = freePort();
  TempProject project({
      {"ductus.yaml", engineYaml()},
      {"interfaces/lab/interface.yaml",
       "source:\n  http: { listen: 127.0.0.1:" + std::to_string(port) +
           ", path: /lab }\nformat: json\ndestination:\n  file: { path: out/ }\n  output: json\n"},
      {"interfaces/lab/transform.js", "export function transform(m) { return m; }\n"},
  });
  EngineProcess engine(project.root(), db.url());
  ASSERT_TRUE(engine.start());
  auto client = HttpClient::connect(port);
  ASSERT_TRUE(client.ok()) << client.error().message;
  auto reply = client->request("POST", "/lab", R"({"mrn":"123","test":"K"})",
                               {{"Content-Type", "application/json"}});
  ASSERT_TRUE(reply.ok()) << reply.error().message;
  EXPECT_EQ(reply->status, 202) << reply->body;
  // The answer names the stored row: a positive whole id, that row's (an
  // empty id, or one the row's is a prefix of, is no answer).
  auto answer = nlohmann::json::parse(reply->body, nullptr, false);
  ASSERT_TRUE(answer.is_object() && answer.contains("id") && answer["id"].is_number_integer())
      << reply->body;
  int64_t id = answer["id"].get<int64_t>();
  EXPECT_GT(id, 0) << reply->body;
  EXPECT_EQ(db.value("SELECT count(*) FROM messages"), "1");
  EXPECT_EQ(db.value("SELECT id FROM messages"), std::to_string(id)) << reply->body;
  ASSERT_TRUE(waitFor([&] { return db.value("SELECT status FROM messages") == "1"; }, 30s))
      << engine.log();
  // What the format can't read is refused before it is stored: by its
  // Content-Type (415) or by its bytes (400), on the same connection.
  auto image = client->request("POST", "/lab", "\x89PNG", {{"Content-Type", "image/png"}});
  ASSERT_TRUE(image.ok()) << image.error().message;
  EXPECT_EQ(image->status, 415) << image->body;
  auto broken =
      client->request("POST", "/lab", "{\"mrn\":", {{"Content-Type", "application/json"}});
  ASSERT_TRUE(broken.ok()) << broken.error().message;
  EXPECT_EQ(broken->status, 400) << broken->body;
  EXPECT_EQ(db.value("SELECT count(*) FROM messages"), "1");
  EXPECT_EQ(engine.terminate(), 0) << engine.log();
}

// MLLP framing bytes never leave as framing. A body holding an end block
// and a start block would reach an MLLP receiver as two messages, the second
// never stored: refused (400), nothing stored, nothing sent. A transform that
// returns the same bytes gets its delivery quarantined, and the receiver
// sees no message at all.
TEST(EngineEndToEnd, FramingBytesFromAnHttpBodyOrATransformNeverReachAnMllpReceiver) {
  TestDatabase db;
  MllpReceiver receiver;
  uint16_t port = freePort();
  auto mllpOut = "destination:\n  mllp: { host: 127.0.0.1, port: " +
                 std::to_string(receiver.port()) + " }\n";
  TempProject project({
      {"ductus.yaml", engineYaml()},
      {"interfaces/inbound/interface.yaml",
       "source:\n  http: { listen: 127.0.0.1:" + std::to_string(port) +
           ", path: /in }\nformat: hl7v2\n" + mllpOut},
      {"interfaces/inbound/transform.js", kPassThrough},
      {"interfaces/smuggle/interface.yaml",
       "source:\n  http: { listen: 127.0.0.1:" + std::to_string(port) +
           ", path: /smuggle }\nformat: hl7v2\n" + mllpOut},
      {"interfaces/smuggle/transform.js",
       "export function transform(msg) {\n"
       "  return msg.toString() + \"\\x1c\\r\\x0bMSH|^~\\\\&|EVIL|F|R|F|2026||ADT^A01|INJECTED2|P|2.5\\r"
       "PID|1||VICTIM\\r\";\n}\n"},
  });
  EngineProcess engine(project.root(), db.url());
  ASSERT_TRUE(engine.start());
  auto client = HttpClient::connect(port);
  ASSERT_TRUE(client.ok()) << client.error().message;
  const std::string injection =
      hl7("OUTER1") + "\x1c\r\x0bMSH|^~\\&|EVIL|F|R|F|2026||ADT^A01|INJECTED1|P|2.5\rPID|1||VICTIM\r";
  auto reply = client->request("POST", "/in", injection, {{"Content-Type", "x-application/hl7-v2+er7"}});
  ASSERT_TRUE(reply.ok()) << reply.error().message;
  EXPECT_EQ(reply->status, 400) << reply->body;
  EXPECT_NE(reply->body.find("contains MLLP framing bytes (0x1C"), std::string::npos)
      << reply->body;
  EXPECT_EQ(db.value("SELECT count(*) FROM messages"), "0");

  reply = client->request("POST", "/smuggle", hl7("SMUGGLE1"), {{"Content-Type", "text/plain"}});
  ASSERT_TRUE(reply.ok()) << reply.error().message;
  EXPECT_EQ(reply->status, 202) << reply->body;
  ASSERT_TRUE(waitFor([&] { return db.value("SELECT status FROM deliveries") == "3"; }, 30s))
      << engine.log();
  EXPECT_NE(db.value("SELECT last_error FROM deliveries").find("output contains MLLP framing bytes"),
            std::string::npos)
      << db.value("SELECT last_error FROM deliveries");

  // The receiver works: a clean message arrives, and it is the only one.
  reply = client->request("POST", "/in", hl7("CLEAN1"), {{"Content-Type", "text/plain"}});
  ASSERT_TRUE(reply.ok()) << reply.error().message;
  EXPECT_EQ(reply->status, 202) << reply->body;
  ASSERT_TRUE(waitFor([&] { return !receiver.accepted().empty(); }, 30s)) << engine.log();
  EXPECT_EQ(engine.terminate(), 0) << engine.log();
  EXPECT_EQ(receiver.accepted(), std::vector<std::string>{"CLEAN1"});
  EXPECT_EQ(receiver.arrivals("INJECTED1") + receiver.arrivals("INJECTED2") +
                receiver.arrivals("SMUGGLE1"),
            0);
}

// hl7apy's test message with custom encoding characters ('!' fields, '$'
// components, 'r' repetitions, '?' escape, '@' subcomponents): answered AA,
// stored and delivered by an MLLP destination byte for byte.
TEST(EngineEndToEnd, Hl7apysCustomDelimitersPassThroughByteForByte) {
  TestDatabase db;
  MllpReceiver receiver;
  uint16_t port = freePort();
  TempProject project(MllpProject{
      .port = port,
      .settings = "ordering: { key: PID.3.1, partitions: 4 }\n",
      .destination = mllpDestination(receiver.port()),
      .transform =
          "export function transform(msg) {\n"
          "  if (msg.get(\"MSH.10\") !== \"430102\" || msg.get(\"PID.3[2].1\") !== \"777\")\n"
          "    throw new Error(\"misread: \" + msg.get(\"MSH.10\") + \" \" + msg.get(\"PID.3[2].1\"));\n"
          "  return msg;\n}\n"});
  EngineProcess engine(project.root(), db.url());
  ASSERT_TRUE(engine.start());
  const std::string msg =
      "MSH!$r?@!LIP!LIP!LB!LB!20111207121030!!RSP^SLI^RSP_K11!430102!D!2.5!!!!!IT!!EN\r"
      "PID!1!!566$$$GHH$MRr777$$$GHH$MR!!SURNAME$NAME\r";
  auto c = MllpClient::connect("127.0.0.1", port);
  ASSERT_TRUE(c.ok());
  auto ack = c->exchange(msg);
  ASSERT_TRUE(ack.ok()) << ack.error().message;
  auto f = readAck(*ack);
  EXPECT_EQ(f.code, "AA") << *ack;
  EXPECT_EQ(f.controlId, "430102") << *ack;
  EXPECT_EQ(db.value("SELECT convert_from(payload, 'LATIN1') = $1 FROM messages", {msg}), "t");
  EXPECT_EQ(db.value("SELECT control_id || ' ' || message_type || ' ' || key_value FROM messages"),
            "430102 RSP^SLI^RSP_K11 566");
  ASSERT_TRUE(waitFor([&] { return !receiver.acceptedMessages().empty(); }, 30s))
      << engine.log();
  EXPECT_EQ(receiver.acceptedMessages(), std::vector<std::string>{msg});
  EXPECT_EQ(engine.terminate(), 0) << engine.log();
}

TEST(EngineEndToEnd, AScheduleRunsAtStartAndStoresDueAndPrevious) {
  TestDatabase db;
  TempProject project({
      {"ductus.yaml", engineYaml()},
      {"interfaces/tick/interface.yaml",
       "source:\n  schedule: { every: 1h }\nformat: json\ndestination:\n  file: { path: out/ }\n"
       "  output: json\n"},
      {"interfaces/tick/transform.js", "export function transform(m) { return m; }\n"},
  });
  EngineProcess engine(project.root(), db.url());
  ASSERT_TRUE(engine.start());
  ASSERT_TRUE(waitFor([&] { return db.value("SELECT count(*) FROM messages") == "1"; }, 20s))
      << engine.log();
  std::string payload = db.value("SELECT convert_from(payload, 'UTF8') FROM messages");
  EXPECT_NE(payload.find("\"due\""), std::string::npos) << payload;
  EXPECT_NE(payload.find("\"previous\":null"), std::string::npos) << payload;
  EXPECT_NE(db.value("SELECT value::text FROM source_state"), "");
  EXPECT_EQ(engine.terminate(), 0) << engine.log();
}

// A batch file with text before its first MSH, and a file that is not HL7 at
// all: what is HL7 is stored, both move on, and the log says what was left
// out and where (before, "g.hl7 stored (1 message(s))" for a file that gave
// none, and nothing about the skipped text).
TEST(EngineEndToEnd, TextOutsideAnyHl7MessageInAFileIsReportedNotSilentlyDropped) {
  TestDatabase db;
  TempProject project({
      {"ductus.yaml", engineYaml()},
      {"interfaces/batch/interface.yaml",
       "source:\n  file: { path: in/, pattern: \"*.hl7\", split: records, move_to: done/, "
       "poll: 200ms }\nformat: hl7v2\ndestination:\n  file: { path: out/ }\n"},
      {"interfaces/batch/transform.js", kPassThrough},
  });
  fs::create_directories(project.root() / "in");
  auto drop = [&](const std::string& name, const std::string& bytes) {
    std::ofstream(project.root() / "in" / ("." + name), std::ios::binary) << bytes;
    fs::rename(project.root() / "in" / ("." + name), project.root() / "in" / name);
  };
  drop("batch.hl7", "exported by X\r\n" + hl7("B-1") + "BTS|1\r");
  drop("zip.hl7", std::string("PK\x03\x04\x14\x00 not hl7", 14));
  // A name in ISO-8859-1: its progress key is text in the database.
  drop("r\xe9sultats.hl7", hl7("L-1"));
  EngineProcess engine(project.root(), db.url());
  ASSERT_TRUE(engine.start());
  ASSERT_TRUE(waitFor(
      [&] {
        return fs::exists(project.root() / "done" / "batch.hl7") &&
               fs::exists(project.root() / "done" / "zip.hl7") &&
               fs::exists(project.root() / "done" / "r\xe9sultats.hl7");
      },
      20s))
      << engine.log();
  EXPECT_EQ(db.value("SELECT count(*) FROM messages"), "2");
  EXPECT_EQ(engine.terminate(), 0) << engine.log();
  const std::string log = engine.log();
  EXPECT_NE(log.find("batch.hl7: 13 byte(s) outside any HL7 message"), std::string::npos) << log;
  EXPECT_NE(log.find("zip.hl7: 14 byte(s) outside any HL7 message"), std::string::npos) << log;
  EXPECT_NE(log.find("the file held no message at all"), std::string::npos) << log;
  EXPECT_NE(log.find("zip.hl7 stored (0 message(s))"), std::string::npos) << log;
}

// Whoever may write to a drop folder must not be able to make the engine
// read any file it may: a link there is skipped (and said once), only the
// regular files are stored; and a file read whole past max_message_size is
// left where it is.
TEST(EngineEndToEnd, AFileSourceSkipsLinksAndLeavesAFileOverTheSizeLimitInPlace) {
  TestDatabase db;
  TempProject project({
      {"ductus.yaml", engineYaml()},
      {"interfaces/drop/interface.yaml",
       "source:\n  file: { path: in/, pattern: \"*.hl7\", move_to: done/, poll: 200ms }\n"
       "format: hl7v2\nmax_message_size: 1KB\ndestination:\n  file: { path: out/ }\n"},
      {"interfaces/drop/transform.js", kPassThrough},
  });
  fs::create_directories(project.root() / "in");
  std::ofstream(project.root() / "secret.txt") << hl7("SECRET-1");
  fs::create_symlink(project.root() / "secret.txt", project.root() / "in" / "link.hl7");
  std::ofstream(project.root() / "in" / ".big") << hl7("BIG-1") << std::string(2000, 'x') << "\r";
  fs::rename(project.root() / "in" / ".big", project.root() / "in" / "big.hl7");
  std::ofstream(project.root() / "in" / ".ok") << hl7("OK-1");
  fs::rename(project.root() / "in" / ".ok", project.root() / "in" / "ok.hl7");
  EngineProcess engine(project.root(), db.url());
  ASSERT_TRUE(engine.start());
  ASSERT_TRUE(waitFor([&] { return fs::exists(project.root() / "done" / "ok.hl7"); }, 20s))
      << engine.log();
  // Two more polls: the link and the big file had their chances.
  std::this_thread::sleep_for(600ms);
  EXPECT_EQ(db.value("SELECT count(*) FROM messages"), "1");
  EXPECT_TRUE(fs::is_symlink(project.root() / "in" / "link.hl7"));
  EXPECT_TRUE(fs::exists(project.root() / "in" / "big.hl7"));
  EXPECT_EQ(engine.terminate(), 0) << engine.log();
  const std::string log = engine.log();
  EXPECT_NE(log.find("link.hl7 is a symbolic link"), std::string::npos) << log;
  EXPECT_EQ(log.find("link.hl7 is a symbolic link"), log.rfind("link.hl7 is a symbolic link"))
      << "said once, not at every poll";
  EXPECT_NE(log.find("over the 1024 byte limit for a message"), std::string::npos) << log;
}

// systemd starts services with 1,024 open files (soft), far below the hard
// limit; past it new connections were closed unanswered. The engine raises
// its soft limit to the hard one.
TEST(EngineEndToEnd, TheEngineRaisesItsOpenFilesLimitToTheHardLimit) {
  rlimit own{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &own), 0);
  if (own.rlim_max < 1024 || own.rlim_max == RLIM_INFINITY)
    GTEST_SKIP() << "hard limit " << own.rlim_max;
  TestDatabase db;
  TempProject project(MllpProject{.port = freePort()});
  rlimit low = own;
  low.rlim_cur = 256;  // what the engine inherits
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  EngineProcess engine(project.root(), db.url());
  bool started = engine.start();
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &own), 0);
  ASSERT_TRUE(started) << engine.log();
  std::ifstream limits("/proc/" + std::to_string(engine.pid()) + "/limits");
  std::string line, soft;
  while (std::getline(limits, line))
    if (line.rfind("Max open files", 0) == 0) soft = line.substr(26, 21);
  soft.erase(soft.find_last_not_of(' ') + 1);
  EXPECT_EQ(soft, std::to_string(own.rlim_max)) << line;
  EXPECT_EQ(engine.terminate(), 0) << engine.log();
}

// Code that does not load: the engine refuses to start, exit 1, naming the
// file and line, and opens no listener (a message it took would wait for
// ever for code that never runs). `timeout` ends an engine that started
// anyway, which is the failure this guards against.
TEST(EngineEndToEnd, CodeThatDoesNotLoadStopsTheStartBeforeAnyListener) {
  TestDatabase db;
  uint16_t port = freePort();
  TempProject project({
      {"ductus.yaml", engineYaml()},
      {"interfaces/good/interface.yaml",
       "source:\n  mllp: { listen: 127.0.0.1:" + std::to_string(port) +
           " }\nformat: hl7v2\ndestination:\n  file: { path: out/ }\n"},
      {"interfaces/good/transform.js", kPassThrough},
      {"interfaces/bad/interface.yaml",
       "source:\n  mllp: { listen: 127.0.0.1:" + std::to_string(freePort()) +
           " }\nformat: hl7v2\ndestination:\n  file: { path: out/ }\n"},
      {"interfaces/bad/transform.js", "export function transform(msg) {\n  let x = ;\n}\n"},
  });
  auto r = runChild({"/bin/sh", "-c",
                     "timeout 60 " + std::string(ductusBinary()) + " run '" +
                         project.root().string() + "' --database '" + db.url() + "' 2>&1"});
  EXPECT_TRUE(exitedWith(r.exitStatus, 1)) << r.out;
  EXPECT_NE(r.out.find((project.root() / "interfaces/bad/transform.js").string() +
                       ":2:11: SyntaxError: Unexpected token ';'\n"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("started:"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("mllp good"), std::string::npos) << r.out;
  EXPECT_FALSE(MllpClient::connect("127.0.0.1", port, 200ms).ok());
  EXPECT_EQ(db.value("SELECT count(*) FROM messages"), "0");
}

// An SFTP server whose key is not pinned is refused before the engine
// connects anywhere, at the line validate names.
TEST(EngineEndToEnd, AnUnpinnedSftpServerIsRefusedBeforeTheDatabase) {
  TempProject project({
      {"ductus.yaml", engineYaml()},
      {"interfaces/pickup/interface.yaml",
       "source:\n  sftp: { host: files.example.org, user: u, password: p, path: in/, delete: true }\n"
       "destination:\n  file: { path: out/ }\n"},
      {"interfaces/pickup/transform.js", kPassThrough},
  });
  auto r = runChild({"/bin/sh", "-c",
                     "timeout 60 " + std::string(ductusBinary()) + " run '" +
                         project.root().string() +
                         "' --database 'postgresql://nobody@127.0.0.1:1/none' 2>&1"});
  EXPECT_TRUE(exitedWith(r.exitStatus, 1)) << r.out;
  EXPECT_NE(r.out.find((project.root() / "interfaces/pickup/interface.yaml").string() +
                       ":2:9: source.sftp: the server's key is not pinned"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("migrat"), std::string::npos) << r.out;
}

// The REST API opens with the engine (--api-listen over ductus.yaml's
// `off`), answers /health for anyone, refuses what needs a caller while no
// sign-in exists, and says 503 on /health all through a stop held up by a
// store in flight.
TEST(EngineEndToEnd, TheApiAnswersHealthAndSays503WhileStopping) {
  TestDatabase db;
  uint16_t port = freePort(), api = freePort();
  TempProject project(MllpProject{.port = port});
  EngineProcess engine(project.root(), db.url());
  engine.setExtraArgs({"--api-listen", "127.0.0.1:" + std::to_string(api)});
  ASSERT_TRUE(engine.start());
  EXPECT_NE(engine.log().find("api 127.0.0.1:" + std::to_string(api)), std::string::npos)
      << engine.log();
  auto get = [&](const std::string& path) -> HttpReply {
    auto c = HttpClient::connect(api);
    if (!c) return {};
    auto r = c->request("GET", path);
    return r ? *r : HttpReply{};
  };
  auto health = get("/api/v1/health");
  EXPECT_EQ(health.status, 200) << engine.log();
  EXPECT_EQ(health.body, "{\"status\":\"serving\"}\n");
  auto interfaces = get("/api/v1/interfaces");
  EXPECT_EQ(interfaces.status, 401);
  EXPECT_NE(interfaces.body.find("\"error\":\"unauthenticated\""), std::string::npos)
      << interfaces.body;
  EXPECT_NE(get("/api/v1/openapi.json").body.find("\"openapi\": \"3.1.0\""), std::string::npos);

  // A store held by a lock keeps the stop waiting.
  PGconn* locker = db.connect();
  PQclear(PQexec(locker, "BEGIN"));
  PGresult* r = PQexec(locker, "LOCK TABLE messages IN EXCLUSIVE MODE");
  ASSERT_EQ(PQresultStatus(r), PGRES_COMMAND_OK) << PQerrorMessage(locker);
  PQclear(r);
  auto c = MllpClient::connect("127.0.0.1", port);
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(c->send(hl7("HELD-1", "M1")).ok());
  EXPECT_FALSE(c->readFrame(500ms).ok());
  engine.signal(SIGTERM);
  EXPECT_TRUE(waitFor([&] { return get("/api/v1/health").status == 503; }, 10s))
      << engine.log();
  auto stopping = get("/api/v1/health");
  EXPECT_NE(stopping.body.find("\"status\":\"stopping\""), std::string::npos) << stopping.body;

  PQclear(PQexec(locker, "COMMIT"));
  PQfinish(locker);
  auto ack = c->readFrame(10000ms);
  ASSERT_TRUE(ack.ok()) << ack.error().message;
  EXPECT_EQ(readAck(*ack).code, "AA");
  EXPECT_TRUE(exitedWith(engine.wait(40s), 0)) << engine.log();
  EXPECT_FALSE(HttpClient::connect(api, 500ms)) << "the API closes with the engine";
}

}  // namespace
}  // namespace ductus::test
