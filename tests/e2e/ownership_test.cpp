// Several engines on one database (issue #21): real `ductus run` processes
// claiming interfaces. Two starting at once with an interface in common: one
// runs, the other exits 3 and says who owns it. A kill -9'd engine's claims
// don't stop the next start; a clean stop deletes them. The lock
// connection terminated by the server: delivery pauses while intake keeps
// storing, then resumes once the lock is taken again; if another engine
// claimed an interface meanwhile, the first exits 3. The lanes guard refuses
// a lowered ordering.partitions that would strand pending messages, and
// `validate --database` says the same. `ductusctl status` shows the others.
// A `--standby` engine waits without listening and takes over within
// seconds of the owner's kill -9 (issue #35).
#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <sys/wait.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "schema/ownership.h"
#include "tests/support/e2e.h"
#include "tests/support/engine_process.h"
#include "tests/support/exit_status.h"
#include "tests/support/mllp_client.h"
#include "tests/support/mllp_project.h"
#include "tests/support/mllp_stream.h"
#include "tests/support/test_database.h"
#include "tests/support/test_env.h"

namespace ductus::test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using nlohmann::json;

// A project of MLLP interfaces (name -> port) writing files to out/.
std::map<std::string, std::string> projectFiles(const std::map<std::string, uint16_t>& ifaces) {
  std::map<std::string, std::string> files;
  for (auto& [name, port] : ifaces) files.merge(MllpProject{.port = port, .name = name}.files());
  return files;
}

// An engine on `project` with a control socket of its own (two engines on
// one machine would otherwise share the default one).
std::unique_ptr<EngineProcess> engineOn(const TempProject& project, const std::string& url) {
  auto e = std::make_unique<EngineProcess>(project.root(), url);
  e->setExtraArgs({"--control", (project.root() / "control").string()});
  return e;
}

bool logSays(const EngineProcess& e, const std::string& text) {
  return e.log().find(text) != std::string::npos;
}

std::string ack(uint16_t port, const std::string& id) {
  auto c = MllpClient::connect("127.0.0.1", port, 5000ms);
  if (!c) return "connect: " + c.error().message;
  auto a = c->exchange(hl7(id), 10000ms);
  if (!a) return "exchange: " + a.error().message;
  return readAck(*a).code;
}

size_t filesIn(const fs::path& dir) {
  std::error_code ec;
  size_t n = 0;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); ++it)
    if (it->path().extension() != ".tmp") ++n;
  return n;
}

// Owner pid of each claimed interface.
std::map<std::string, std::string> owners(TestDatabase& db) {
  std::map<std::string, std::string> out;
  auto rows = db.column(
      "SELECT i.name || '=' || e.pid FROM interface_owners o JOIN interfaces i ON "
      "i.id = o.interface_id JOIN engines e ON e.id = o.engine_id");
  for (auto& r : rows) out[r.substr(0, r.find('='))] = r.substr(r.find('=') + 1);
  return out;
}

// Ends the lock connection of the engine with this pid, as an operator's
// pg_terminate_backend (or a failover) would.
bool terminateLockConnection(TestDatabase& db, pid_t engine) {
  return db.value(
             "SELECT pg_terminate_backend(l.pid) FROM pg_locks l JOIN engines e ON "
             "l.locktype = 'advisory' AND l.classid = (e.lock_key >> 32)::oid AND "
             "l.objid = (e.lock_key & 4294967295)::oid AND l.objsubid = 1 "
             "WHERE e.pid = $1 AND e.stopped_at IS NULL AND l.granted",
             {std::to_string(engine)}) == "t";
}

// A transaction of the test's own holding the claims' advisory lock: every
// engine's claim waits until release().
class ClaimBlocker {
 public:
  explicit ClaimBlocker(TestDatabase& db) : conn_(db.connect()) {
    exec("BEGIN");
    exec("SELECT pg_advisory_xact_lock(" + std::to_string(store::kClaimLock) + ")");
  }
  ~ClaimBlocker() { release(); }
  void release() {
    if (!conn_) return;
    exec("COMMIT");
    PQfinish(conn_);
    conn_ = nullptr;
  }

 private:
  void exec(const std::string& sql) {
    PGresult* r = PQexec(conn_, sql.c_str());
    if (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK)
      ADD_FAILURE() << sql << ": " << PQerrorMessage(conn_);
    PQclear(r);
  }
  PGconn* conn_;
};

TEST(Ownership, TwoEnginesClaimingAnInterfaceAtOnceOneRunsTheOtherExits3) {
  TestDatabase db;
  uint16_t shared1 = freePort(), shared2 = freePort();
  TempProject p1(projectFiles({{"x", freePort()}, {"shared", shared1}}));
  TempProject p2(projectFiles({{"shared", shared2}, {"y", freePort()}}));
  // Twice: which one wins is the race's; that exactly one does is not.
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    auto e1 = engineOn(p1, db.url());
    auto e2 = engineOn(p2, db.url());
    // The projects' logs run on across rounds: this round's part.
    size_t from1 = e1->log().size(), from2 = e2->log().size();
    auto log1 = [&] { return e1->log().substr(from1); };
    auto log2 = [&] { return e2->log().substr(from2); };
    ASSERT_TRUE(e1->spawn());
    ASSERT_TRUE(e2->spawn());
    int st1 = -1, st2 = -1;
    auto until = std::chrono::steady_clock::now() + 90s;
    while (std::chrono::steady_clock::now() < until) {
      if (st1 == -1) st1 = e1->wait(1s);
      if (st2 == -1) st2 = e2->wait(1s);
      if (st1 != -1 && st2 != -1) break;
      if (st1 != -1 && log2().find("started:") != std::string::npos) break;
      if (st2 != -1 && log1().find("started:") != std::string::npos) break;
    }
    ASSERT_TRUE((st1 == -1) != (st2 == -1)) << "exactly one must be left running\n1:\n"
                                            << log1() << "\n2:\n"
                                            << log2();
    EngineProcess& winner = st1 == -1 ? *e1 : *e2;
    int lost = st1 == -1 ? st2 : st1;
    EXPECT_TRUE(exitedWith(lost, 3)) << lost << "\n" << (st1 == -1 ? log2() : log1());
    // Who owns it: the interface, the winner's pid and host.
    std::string l = st1 == -1 ? log2() : log1();
    EXPECT_NE(l.find("shared is owned by engine"), std::string::npos) << l;
    EXPECT_NE(l.find("pid " + std::to_string(winner.pid())), std::string::npos) << l;
    EXPECT_EQ(l.find("started:"), std::string::npos) << l;
    // The loser claimed nothing, not even its interface nobody else had.
    auto o = owners(db);
    EXPECT_EQ(o["shared"], std::to_string(winner.pid()));
    EXPECT_EQ(o.size(), 2u);
    EXPECT_EQ(ack(&winner == e1.get() ? shared1 : shared2, "R" + std::to_string(round)), "AA");
    // A clean stop deletes the claims and marks the engine stopped.
    EXPECT_TRUE(exitedWith(winner.terminate(), 0)) << winner.log();
    EXPECT_TRUE(owners(db).empty());
    EXPECT_EQ(db.value("SELECT count(*) FROM engines WHERE stopped_at IS NULL"), "0");
  }
}

TEST(Ownership, AKilledEnginesClaimsDoNotStopTheNextStart) {
  TestDatabase db;
  TempProject p1(projectFiles({{"shared", freePort()}}));
  uint16_t port2 = freePort();
  TempProject p2(projectFiles({{"shared", port2}}));
  auto e1 = engineOn(p1, db.url());
  ASSERT_TRUE(e1->start());
  pid_t dead = e1->pid();
  EXPECT_EQ(owners(db)["shared"], std::to_string(dead));
  e1->kill9();
  // No timeout to wait out: its lock went with its connection.
  auto e2 = engineOn(p2, db.url());
  ASSERT_TRUE(e2->start(30s));
  EXPECT_EQ(owners(db)["shared"], std::to_string(e2->pid()));
  EXPECT_TRUE(logSays(*e2, "found dead")) << e2->log();
  EXPECT_NE(db.value("SELECT stopped_at FROM engines WHERE pid = $1", {std::to_string(dead)}), "");
  EXPECT_EQ(ack(port2, "K1"), "AA");
  EXPECT_TRUE(exitedWith(e2->terminate(), 0)) << e2->log();
}

TEST(Ownership, ALostLockPausesDeliveryWhileIntakeStoresAndDeliveryResumesOnceRetaken) {
  TestDatabase db;
  uint16_t port = freePort();
  auto files = projectFiles({{"adt", port}});
  files["interfaces/drop/interface.yaml"] =
      "source:\n  file: { path: in/, pattern: \"*.hl7\", delete: true, poll: 200ms }\n"
      "format: hl7v2\ndestination:\n  file: { path: out-drop/ }\n";
  files["interfaces/drop/transform.js"] = kPassThrough;
  TempProject p(files);
  fs::create_directories(p.root() / "in");
  auto e = engineOn(p, db.url());
  ASSERT_TRUE(e->start());
  fs::path out = p.root() / "out";
  fs::path dropped = p.root() / "in" / "a.hl7";
  ASSERT_EQ(ack(port, "BEFORE"), "AA");
  ASSERT_TRUE(waitFor([&] { return filesIn(out) == 1; }, 30s)) << e->log();

  {
    // The engine's claims can't be re-checked while the test holds the
    // claims' lock: it stays paused, observably.
    ClaimBlocker blocker(db);
    ASSERT_TRUE(terminateLockConnection(db, e->pid())) << e->log();
    ASSERT_TRUE(waitFor([&] { return logSays(*e, "ownership: lost the lock"); }, 20s)) << e->log();
    auto status =
        json::parse(runChild({(fs::path(ductusBinary()).parent_path() / "ductusctl").string(),
                              "status", "--json", "--control", (p.root() / "control").string()})
                        .out,
                    nullptr, false);
    ASSERT_TRUE(status.is_object());
    EXPECT_EQ(status["engine"].value("ownership", ""), "lost") << status.dump();
    // Intake keeps storing and acknowledging; nothing is delivered, and
    // the file source takes no file.
    EXPECT_EQ(ack(port, "DURING"), "AA");
    std::ofstream(dropped) << hl7("FILE");
    std::this_thread::sleep_for(3s);
    EXPECT_EQ(filesIn(out), 1u) << e->log();
    EXPECT_TRUE(fs::exists(dropped)) << e->log();
    EXPECT_EQ(db.value("SELECT count(*) FROM deliveries WHERE status = 0"), "1");
    EXPECT_FALSE(logSays(*e, "lock taken again")) << e->log();
  }
  // Released: the lock is taken again, the claims are still its own.
  ASSERT_TRUE(waitFor([&] { return filesIn(out) == 2; }, 30s)) << e->log();
  EXPECT_TRUE(logSays(*e, "lock taken again")) << e->log();
  EXPECT_EQ(owners(db)["adt"], std::to_string(e->pid()));
  ASSERT_TRUE(waitFor([&] { return filesIn(p.root() / "out-drop") == 1; }, 30s)) << e->log();
  EXPECT_FALSE(fs::exists(dropped));
  EXPECT_EQ(ack(port, "AFTER"), "AA");
  ASSERT_TRUE(waitFor([&] { return filesIn(out) == 3; }, 30s)) << e->log();
  EXPECT_TRUE(exitedWith(e->terminate(), 0)) << e->log();
  EXPECT_TRUE(owners(db).empty());
}

TEST(Ownership, AnEngineWhoseInterfaceWasTakenWhileItsLockWasLostExits3) {
  TestDatabase db;
  // Engine 1 connects as a role of its own, so the test can keep it from
  // taking its lock again (NOLOGIN) while engine 2 starts.
  std::string role = "own_" + db.value("SELECT current_database()");
  db.value("CREATE ROLE " + role + " LOGIN SUPERUSER");
  uint16_t port1 = freePort(), port2 = freePort();
  TempProject p1(projectFiles({{"shared", port1}}));
  TempProject p2(projectFiles({{"shared", port2}}));
  auto e1 = engineOn(p1, db.url() + " user=" + role);
  ASSERT_TRUE(e1->start());
  db.value("ALTER ROLE " + role + " NOLOGIN");
  ASSERT_TRUE(terminateLockConnection(db, e1->pid())) << e1->log();
  ASSERT_TRUE(waitFor([&] { return logSays(*e1, "taking the lock again failed"); }, 20s))
      << e1->log();
  // Intake goes on storing on engine 1's pool; its delivery is paused.
  EXPECT_EQ(ack(port1, "STILL"), "AA");
  // Engine 1 is dead to the others now: engine 2 takes the interface.
  auto e2 = engineOn(p2, db.url());
  ASSERT_TRUE(e2->start());
  EXPECT_EQ(owners(db)["shared"], std::to_string(e2->pid()));
  db.value("ALTER ROLE " + role + " LOGIN");
  int st = e1->wait(30s);
  EXPECT_TRUE(exitedWith(st, 3)) << st << "\n" << e1->log();
  EXPECT_TRUE(logSays(*e1, "shared is owned by engine")) << e1->log();
  EXPECT_TRUE(logSays(*e1, "pid " + std::to_string(e2->pid()))) << e1->log();
  // Engine 2 runs on, and delivers what engine 1 stored.
  ASSERT_TRUE(waitFor([&] { return filesIn(p2.root() / "out") >= 1; }, 30s)) << e2->log();
  EXPECT_EQ(ack(port2, "TWO"), "AA");
  EXPECT_TRUE(exitedWith(e2->terminate(), 0)) << e2->log();
  db.value("REASSIGN OWNED BY " + role + " TO CURRENT_USER");
  db.value("DROP OWNED BY " + role);
  db.value("DROP ROLE " + role);
}

TEST(Ownership, LoweredPartitionsThatWouldStrandPendingMessagesRefuseTheStart) {
  TestDatabase db;
  uint16_t port = freePort();
  // Nothing listens there: every delivery stays pending, backing off.
  MllpProject adt{.port = port,
                  .settings = "ordering: { key: PID.3.1, partitions: 8 }\n",
                  .destination = mllpDestination(freePort())};
  std::string yaml8 = adt.interfaceYaml();
  TempProject p(adt);
  auto e = engineOn(p, db.url());
  ASSERT_TRUE(e->start());
  {
    auto c = MllpClient::connect("127.0.0.1", port, 5000ms);
    ASSERT_TRUE(c) << c.error().message;
    for (int i = 0; i < 20; ++i) {
      auto a = c->exchange(hl7("L" + std::to_string(i), "MRN" + std::to_string(i)), 10000ms);
      ASSERT_TRUE(a) << a.error().message;
      ASSERT_EQ(readAck(*a).code, "AA");
    }
  }
  EXPECT_TRUE(exitedWith(e->terminate(), 0)) << e->log();
  std::string stranded =
      db.value("SELECT count(*) FROM messages WHERE status = 0 AND partition_key >= 2");
  ASSERT_NE(stranded, "0");

  std::string yaml2 = yaml8;
  yaml2.replace(yaml2.find("partitions: 8"), 13, "partitions: 2");
  std::ofstream(p.root() / "interfaces/adt/interface.yaml") << yaml2;
  size_t from = e->log().size();
  ASSERT_TRUE(e->spawn());
  int st = e->wait(60s);
  EXPECT_TRUE(exitedWith(st, 1)) << st << "\n" << e->log();
  EXPECT_TRUE(logSays(
      *e, "adt: ordering.partitions 2 would leave " + stranded + " pending message(s) in lane(s)"))
      << e->log();
  EXPECT_TRUE(logSays(*e, "Set ordering.partitions back to at least")) << e->log();
  EXPECT_EQ(e->log().find("started:", from), std::string::npos) << e->log();
  EXPECT_TRUE(owners(db).empty()) << "a refused start keeps no claim";

  // validate --database runs the same check, read-only.
  auto v = runChild({ductusBinary(), "validate", p.root().string(), "--database", db.url()});
  EXPECT_TRUE(exitedWith(v.exitStatus, 1)) << v.out;
  EXPECT_NE(v.out.find("lanes: adt: ordering.partitions 2 would leave " + stranded),
            std::string::npos)
      << v.out;
  std::ofstream(p.root() / "interfaces/adt/interface.yaml") << yaml8;
  v = runChild({ductusBinary(), "validate", p.root().string(), "--database", db.url()});
  EXPECT_TRUE(exitedWith(v.exitStatus, 0)) << v.out;
  EXPECT_NE(v.out.find("lanes: every pending message is in a lane the project keeps"),
            std::string::npos)
      << v.out;
  ASSERT_TRUE(e->start());
  EXPECT_TRUE(exitedWith(e->terminate(), 0)) << e->log();
}

TEST(Ownership, EnginesWithDisjointInterfacesRunSideBySideAndStatusShowsTheOthers) {
  TestDatabase db;
  TempProject p1(projectFiles({{"x", freePort()}}));
  TempProject p2(projectFiles({{"y", freePort()}, {"z", freePort()}}));
  auto e1 = engineOn(p1, db.url());
  auto e2 = engineOn(p2, db.url());
  ASSERT_TRUE(e1->start());
  ASSERT_TRUE(e2->start());
  std::string ctl = (fs::path(ductusBinary()).parent_path() / "ductusctl").string();
  std::string control = (p1.root() / "control").string();
  json status;
  ASSERT_TRUE(waitFor(
      [&] {
        status = json::parse(runChild({ctl, "status", "--json", "--control", control}).out, nullptr,
                             false);
        return status.is_object() && status.contains("otherEngines") &&
               status["otherEngines"].size() == 1;
      },
      20s))
      << status.dump() << "\n"
      << e1->log();
  auto other = status["otherEngines"][0];
  EXPECT_EQ(other.value("pid", int64_t{0}), e2->pid());
  EXPECT_EQ(other["interfaces"], json({"y", "z"}));
  EXPECT_FALSE(other.value("host", "").empty());
  EXPECT_FALSE(other.value("startedAt", "").empty());
  EXPECT_EQ(status["engine"].value("ownership", ""), "held");
  EXPECT_EQ(status["engine"].value("engineId", "").size(), 16u);
  auto table = runChild({ctl, "status", "--control", control}).out;
  EXPECT_NE(table.find("OTHER ENGINE"), std::string::npos) << table;
  EXPECT_NE(table.find(other.value("id", "")), std::string::npos) << table;
  EXPECT_TRUE(exitedWith(e2->terminate(), 0)) << e2->log();
  // Gone from the view at the next check.
  ASSERT_TRUE(waitFor(
      [&] {
        status = json::parse(runChild({ctl, "status", "--json", "--control", control}).out, nullptr,
                             false);
        return status.is_object() && status["otherEngines"].empty();
      },
      20s))
      << status.dump();
  EXPECT_TRUE(exitedWith(e1->terminate(), 0)) << e1->log();
}

// Every file under dir (a file destination's folder), read whole.
std::string contentsOf(const fs::path& dir) {
  std::string all;
  std::error_code ec;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); ++it) {
    if (it->path().extension() == ".tmp") continue;
    std::ifstream in(it->path(), std::ios::binary);
    all.append(std::istreambuf_iterator<char>(in), {});
  }
  return all;
}

// An active engine and two --standby ones on the same interface (three
// project folders, as three machines would have): a standby loads
// everything, listens on nothing and says "standby" in `ductusctl status`;
// kill -9 of the active one under a streaming sender, and one standby takes
// the interface over within 10 s (its listener answers AA again) while the
// other keeps waiting; every message that was ever ACKed is delivered by
// one engine or another.
TEST(Standby, TakesOverWithinSecondsOfTheOwnersKillNineAndEveryAckedMessageIsDelivered) {
  TestDatabase db;
  uint16_t port = freePort();
  TempProject active(projectFiles({{"adt", port}}));
  TempProject standby1(projectFiles({{"adt", port}}));
  TempProject standby2(projectFiles({{"adt", port}}));
  auto a = engineOn(active, db.url());
  ASSERT_TRUE(a->start());
  std::vector<std::unique_ptr<EngineProcess>> standbys;
  for (auto* p : {&standby1, &standby2}) {
    standbys.push_back(engineOn(*p, db.url()));
    standbys.back()->setExtraArgs({"--control", (p->root() / "control").string(), "--standby"});
    ASSERT_TRUE(standbys.back()->spawn());
  }
  for (auto& s : standbys)
    ASSERT_TRUE(waitFor([&] { return logSays(*s, "standby: ready"); }, 60s)) << s->log();
  std::string ctl = (fs::path(ductusBinary()).parent_path() / "ductusctl").string();
  auto statusOf = [&](const TempProject& p) {
    return json::parse(
        runChild({ctl, "status", "--json", "--control", (p.root() / "control").string()}).out,
        nullptr, false);
  };
  // Each standby reads the other engines at its tries, a second apart.
  json status;
  ASSERT_TRUE(waitFor(
      [&] {
        status = statusOf(standby1);
        return status.is_object() && status["otherEngines"].size() == 2;
      },
      20s))
      << status.dump() << "\n"
      << standbys[0]->log();
  EXPECT_EQ(status["engine"].value("ownership", ""), "standby");
  json owning;
  for (auto& o : status["otherEngines"])
    if (o.value("pid", int64_t{0}) == a->pid()) owning = o;
  EXPECT_EQ(owning["interfaces"], json({"adt"})) << status.dump();
  EXPECT_EQ(owners(db)["adt"], std::to_string(a->pid()));
  for (auto& s : standbys) EXPECT_FALSE(logSays(*s, "started:")) << s->log();

  // One sender, one message at a time, reconnecting while nobody answers.
  std::atomic<bool> stop{false};
  Answers answers;
  std::thread sender([&] { streamMllp(port, answers, stop, "SB", 10000ms, 0ms); });
  auto ackedCount = [&] { return answers.countSince("AA", {}); };
  ASSERT_TRUE(waitFor([&] { return ackedCount() >= 100; }, 60s)) << a->log();
  a->kill9();
  auto killedAt = std::chrono::steady_clock::now();
  size_t before = ackedCount();
  EngineProcess* b = nullptr;  // the standby that took over
  bool took = waitFor(
      [&] {
        for (auto& s : standbys)
          if (logSays(*s, "started: took over")) b = s.get();
        return b != nullptr;
      },
      10s);
  auto tookMs = std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::steady_clock::now() - killedAt)
                    .count();
  ASSERT_TRUE(took) << "no standby took over within 10 s\n"
                    << standbys[0]->log() << "\n"
                    << standbys[1]->log();
  EngineProcess* other = b == standbys[0].get() ? standbys[1].get() : standbys[0].get();
  ASSERT_TRUE(waitFor([&] { return ackedCount() >= before + 100; }, 60s)) << b->log();
  stop = true;
  sender.join();
  std::printf("[ standby ] took over %lld ms after the kill -9; %zu acked before, %zu in all\n",
              static_cast<long long>(tookMs), before, ackedCount());
  RecordProperty("takeover_ms", std::to_string(tookMs));
  EXPECT_EQ(owners(db)["adt"], std::to_string(b->pid()));
  // The other still waits, and says who owns the interface now.
  EXPECT_FALSE(logSays(*other, "started:")) << other->log();
  status = statusOf(b == standbys[0].get() ? standby2 : standby1);
  EXPECT_EQ(status["engine"].value("ownership", ""), "standby") << status.dump();
  // At least once: each ACKed message is in one engine's files or another's.
  std::string missing;
  ASSERT_TRUE(waitFor(
      [&] {
        std::string all = contentsOf(active.root() / "out") + contentsOf(standby1.root() / "out") +
                          contentsOf(standby2.root() / "out");
        missing.clear();
        for (auto& a : answers.all())
          if (a.code == "AA" && all.find("|" + a.id + "|") == std::string::npos)
            missing += a.id + " ";
        return missing.empty();
      },
      60s))
      << "ACKed but never delivered: " << missing << "\n"
      << b->log();
  EXPECT_TRUE(exitedWith(b->terminate(), 0)) << b->log();
  // A standby stopped while waiting exits 0 and leaves no live engine row.
  EXPECT_TRUE(exitedWith(other->terminate(), 0)) << other->log();
  EXPECT_EQ(db.value("SELECT count(*) FROM engines WHERE stopped_at IS NULL"), "0");
}

// An owner lets its lock go for a moment when its check fails (here: its
// lock connection terminated, as a database restart would) and takes it
// again 2 s later. A standby must not take over in between: it would
// remove the owner's rows as dead, and the owner would exit 3.
TEST(Standby, AnOwnerWhoseLockWentForAMomentKeepsItsInterfacesWhileTheStandbyWaits) {
  TestDatabase db;
  uint16_t port = freePort();
  TempProject active(projectFiles({{"adt", port}}));
  TempProject standby(projectFiles({{"adt", port}}));
  auto a = engineOn(active, db.url());
  ASSERT_TRUE(a->start());
  auto b = engineOn(standby, db.url());
  b->setExtraArgs({"--control", (standby.root() / "control").string(), "--standby"});
  ASSERT_TRUE(b->spawn());
  ASSERT_TRUE(waitFor([&] { return logSays(*b, "standby: ready"); }, 60s)) << b->log();
  ASSERT_TRUE(terminateLockConnection(db, a->pid())) << a->log();
  ASSERT_TRUE(waitFor([&] { return logSays(*a, "ownership: lost the lock"); }, 20s)) << a->log();
  ASSERT_TRUE(waitFor([&] { return logSays(*a, "lock taken again"); }, 30s)) << a->log();
  // Longer than the standby's grace: it still waits.
  EXPECT_FALSE(waitFor([&] { return logSays(*b, "took over"); }, 6s)) << b->log();
  EXPECT_EQ(a->wait(0s), -1) << "the owner exited\n" << a->log();
  EXPECT_EQ(owners(db)["adt"], std::to_string(a->pid()));
  EXPECT_EQ(ack(port, "AFTER"), "AA");
  EXPECT_TRUE(exitedWith(b->terminate(), 0)) << b->log();
  EXPECT_TRUE(exitedWith(a->terminate(), 0)) << a->log();
}

}  // namespace
}  // namespace ductus::test
