#include "supervisor/cli/retention_command.h"

#include <uv.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/command_line.h"
#include "common/config/loader.h"
#include "common/uv_handle.h"
#include "schema/pg_connection.h"
#include "schema/pg_error.h"
#include "schema/retention.h"
#include "supervisor/retention_job.h"

namespace ductus::supervisor {
namespace {

struct Args {
  std::string project = ".";
  std::string database;
  std::string environment;
  std::string interface;  // confirm
};

// A private loop for the command's async calls; whatever ran on it is closed
// and drained before it goes (declare it before the objects that use it).
class Loop {
 public:
  Loop() { uv_loop_init(&loop_); }
  ~Loop() { closeLoop(&loop_); }
  uv_loop_t* get() { return &loop_; }

  template <typename T>
  Result<T> wait(std::function<void(std::function<void(Result<T>)>)> start) {
    std::optional<Result<T>> out;
    start([&](Result<T> r) { out = std::move(r); });
    while (!out && uv_run(&loop_, UV_RUN_ONCE)) {
    }
    if (!out) return Error{"the database did not answer"};
    return std::move(*out);
  }

 private:
  uv_loop_t loop_;
};

store::Tier tierOf(config::Retention r) { return static_cast<store::Tier>(static_cast<int16_t>(r)); }

int fail(const char* command, const std::string& why) {
  std::fprintf(stderr, "ductus retention%s: %s\n", command, why.c_str());
  return 1;
}

// The interface_retention table comes with migration 0004.
std::string explain(const Error& e) {
  if (store::pg::undefinedTable(e))
    return e.message + " (the database predates retention: start the engine once, or run "
                       "`ductus migrate`)";
  return e.message;
}

struct Opened {
  config::Project project;
  std::string database;
};

Result<Opened> open(const Args& args) {
  config::LoadOptions lo;
  lo.environment = args.environment.empty() ? config::defaultEnvironment() : args.environment;
  auto p = config::loadProject(args.project, lo);
  if (!p) return Error{"the project " + args.project + " has errors:\n" + p.error().message};
  std::string db = args.database;
  if (db.empty()) db = p->engine.database;
  if (db.empty())
    if (const char* e = std::getenv("DUCTUS_DATABASE_URL")) db = e;
  if (db.empty())
    return Error{"no database: give --database URL, set database: in ductus.yaml, or set "
                 "DUCTUS_DATABASE_URL"};
  return Opened{std::move(*p), std::move(db)};
}

// The project's queued interfaces that the database knows (a start
// registered them), with their ids; the others are named in `unstarted`.
Result<std::vector<RetentionInterface>> knownInterfaces(Loop& loop, const Opened& o,
                                                        std::vector<std::string>* unstarted) {
  store::PgConnection conn(loop.get());
  auto ids = loop.wait<std::map<std::string, int64_t>>([&](auto done) {
    conn.connect(o.database, [&conn, done](Status s) {
      if (!s) return done(s.error());
      conn.query("SELECT name, id FROM interfaces", {}, [done](Result<store::PgResult> r) {
        if (!r) return done(r.error());
        std::map<std::string, int64_t> out;
        for (int i = 0; i < r->rows(); ++i) out[std::string(r->text(i, 0))] = r->integer(i, 1);
        done(std::move(out));
      });
    });
  });
  if (!ids) return ids.error();
  std::vector<RetentionInterface> out;
  for (auto& c : o.project.interfaces) {
    if (c.respondMode()) continue;
    auto it = ids->find(c.name);
    if (it == ids->end()) {
      if (unstarted) unstarted->push_back(c.name);
      continue;
    }
    out.push_back({it->second, c.name, tierOf(c.retention), c.dedupeWindow,
                   c.quarantined == config::QuarantinedRetention::Purge});
  }
  return out;
}

std::string rows(int64_t n) {
  std::string s = std::to_string(n), out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i && (s.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(s[i]);
  }
  return out;
}

int show(const Args& args) {
  auto o = open(args);
  if (!o) return fail("", o.error().message);
  Loop loop;
  std::vector<std::string> unstarted;
  auto known = knownInterfaces(loop, *o, &unstarted);
  if (!known) return fail("", known.error().message);
  store::RetentionOptions options;
  options.conninfo = o->database;
  for (auto& i : *known)
    if (i.purgeQuarantined) options.quarantinePurged.push_back(i.id);
  store::Retention retention(loop.get(), options);
  std::vector<store::InterfaceTier> list;
  for (auto& i : *known) list.push_back({i.id, i.name, i.configured});
  auto tiers = loop.wait<std::vector<store::TierState>>(
      [&](auto done) { retention.readTiers(list, done); });
  if (!tiers) return fail("", explain(tiers.error()));
  auto plan = loop.wait<store::RetentionPlan>([&](auto done) { retention.plan(done); });
  if (!plan) return fail("", explain(plan.error()));
  auto held = loop.wait<store::HeldCounts>([&](auto done) { retention.countHeld(done); });
  if (!held) return fail("", explain(held.error()));

  std::printf("Interfaces (retention: where new messages go)\n");
  using Change = store::TierState::Change;
  for (auto& t : *tiers) {
    std::string note;
    if (t.change == Change::Waiting)
      note = std::string("  the project says ") + store::tierName(t.configured) +
             ": waiting for `ductus retention confirm " + t.name + "`";
    else if (t.change == Change::Lengthened)
      note = std::string("  the project says ") + store::tierName(t.configured) +
             ": applies at the engine's next start";
    else if (t.change == Change::New)
      note = "  (applies at the engine's next start)";
    std::printf("  %-32s %s%s\n", t.name.c_str(), store::tierName(t.applied), note.c_str());
  }
  for (auto& n : unstarted) std::printf("  %-32s (not started yet)\n", n.c_str());

  std::printf("\nPartitions (UTC periods; rows are estimates)\n");
  std::printf("  %-4s %-23s %12s %12s %10s  %s\n", "tier", "period", "messages", "deliveries",
              "size", "drop");
  int64_t nextPeriods = 0, nextMessages = 0, nextBytes = 0;
  for (auto& p : plan->periods) {
    std::string when;
    if (p.tier == store::Tier::Held)
      when = p.expired && p.unfinished == 0
                 ? "next run"
                 : "once over and nothing in it unfinished" +
                       (p.expired ? " (" + rows(p.unfinished) + " unfinished)" : "");
    else if (p.expired && p.unfinished > 0) {
      when = "next run, after moving " + rows(p.unfinished) + " unfinished rows to the held area";
      ++nextPeriods;
      nextMessages += p.messages;
      nextBytes += p.bytes;
    } else if (p.expired) {
      when = "next run";
      ++nextPeriods;
      nextMessages += p.messages;
      nextBytes += p.bytes;
    } else {
      when = p.dropsOn;
    }
    if (p.detached) when += " (an interrupted drop: finished by the next run)";
    std::printf("  %-4s %-23s %12s %12s %10s  %s\n", store::tierName(p.tier),
                (p.from + " to " + p.to).c_str(), rows(p.messages).c_str(),
                rows(p.deliveries).c_str(), store::describeBytes(p.bytes).c_str(), when.c_str());
  }
  std::printf(
      "\nHeld area (unfinished messages of expired periods, in %d monthly "
      "partitions): %s pending, %s quarantined, %s finished, %s\n",
      held->months, rows(held->pending).c_str(), rows(held->quarantined).c_str(),
      rows(held->finished).c_str(), store::describeBytes(held->bytes).c_str());
  if (nextPeriods == 0)
    std::printf("\nThe next drop removes nothing.\n");
  else
    std::printf("\nThe next drop removes %lld periods: about %s messages, %s.\n",
                static_cast<long long>(nextPeriods), rows(nextMessages).c_str(),
                store::describeBytes(nextBytes).c_str());
  return 0;
}

}  // namespace

int showRetention(const std::string& project, const std::string& database,
                  const std::string& environment) {
  Args args;
  args.project = project;
  args.database = database;
  args.environment = environment;
  return show(args);
}

namespace {

int runNow(const Args& args) {
  auto o = open(args);
  if (!o) return fail(" run", o.error().message);
  Loop loop;
  auto known = knownInterfaces(loop, *o, nullptr);
  if (!known) return fail(" run", known.error().message);
  RetentionJob job(loop.get(), o->database, std::move(*known));
  auto r = loop.wait<RetentionRun>([&](auto done) { job.runOnce(done, false); });
  if (!r) return fail(" run", explain(r.error()));
  auto lines = describeRun(*r);
  for (auto& l : lines) std::printf("%s\n", l.text.c_str());
  if (r->drops.dropped.empty() && r->drops.held.empty() && r->drops.failed.empty() &&
      !r->drops.busy)
    std::printf("retention: nothing has expired\n");
  if (r->dedupeKeysPurged == 0) std::printf("retention: no dedupe keys past their window\n");
  return r->drops.failed.empty() ? 0 : 1;
}

int confirm(const Args& args) {
  auto o = open(args);
  if (!o) return fail(" confirm", o.error().message);
  const config::InterfaceConfig* c = o->project.find(args.interface);
  if (!c || c->respondMode())
    return fail(" confirm", "the project has no queued interface named " + args.interface);
  Loop loop;
  auto known = knownInterfaces(loop, *o, nullptr);
  if (!known) return fail(" confirm", known.error().message);
  const RetentionInterface* i = nullptr;
  for (auto& k : *known)
    if (k.name == args.interface) i = &k;
  if (!i) {
    std::printf("%s has not started yet: its first start applies %s without asking\n",
                args.interface.c_str(), store::tierName(tierOf(c->retention)));
    return 0;
  }
  store::RetentionOptions options;
  options.conninfo = o->database;
  store::Retention retention(loop.get(), options);
  auto changed = loop.wait<bool>([&](auto done) { retention.confirm(i->id, i->configured, done); });
  if (!changed) return fail(" confirm", explain(changed.error()));
  if (!*changed) {
    std::printf("nothing to confirm: %s's retention (%s) is not shorter than the one applied\n",
                i->name.c_str(), store::tierName(i->configured));
    return 0;
  }
  std::printf(
      "confirmed: %s's new messages go to the %s tier from the engine's next start; "
      "its retention runs then bring those stored before to it (deleting the ones "
      "it no longer keeps)\n",
      i->name.c_str(), store::tierName(i->configured));
  return 0;
}

void addCommon(CLI::App& cmd, Args& args) {
  cmd.add_option("--database", args.database,
                 "PostgreSQL URL; else database: in ductus.yaml, else $DUCTUS_DATABASE_URL")
      ->type_name("URL");
  addEnvironmentOption(cmd, args.environment);
}

}  // namespace

void addRetentionCommand(CLI::App& ductus, int& exitCode) {
  auto showArgs = std::make_shared<Args>();
  auto* cmd = ductus.add_subcommand(
      "retention", "list retention tiers and partitions; run the retention job; confirm a tier");
  cmd->require_subcommand(0, 1);
  addProjectArgument(*cmd, showArgs->project);
  addCommon(*cmd, *showArgs);
  cmd->footer(
      "Lists each interface's retention tier (1w, 3w, 7w: 7, 21, 49 days), every\n"
      "partition with its rows, size and drop date, and what the next drop removes.\n"
      "A period goes once all of it is older than its tier's days; one that still\n"
      "holds pending messages is held until they are delivered. The engine runs the\n"
      "job 5 s after its start and every hour.");

  auto runArgs = std::make_shared<Args>();
  auto* run = cmd->add_subcommand("run", "run the retention job once, now: drops, dedupe keys");
  addProjectArgument(*run, runArgs->project);
  addCommon(*run, *runArgs);
  run->callback([runArgs, &exitCode] { exitCode = runNow(*runArgs); });

  auto confirmArgs = std::make_shared<Args>();
  auto* conf = cmd->add_subcommand("confirm", "apply a shorter retention the project asks for");
  conf->add_option("INTERFACE", confirmArgs->interface, "the interface")->required()->type_name("");
  addProjectArgument(*conf, confirmArgs->project);
  addCommon(*conf, *confirmArgs);
  conf->footer(
      "A shorter retention deletes messages sooner, so the engine doesn't apply it by\n"
      "itself: until it is confirmed, the interface's messages keep going to the tier\n"
      "applied before. Once it applies, the engine's retention runs bring the messages\n"
      "already stored to it: finished ones it no longer keeps are deleted, the others\n"
      "move (pending ones once finished; quarantined ones are kept).");
  conf->callback([confirmArgs, &exitCode] { exitCode = confirm(*confirmArgs); });

  cmd->callback([cmd, showArgs, &exitCode] {
    if (!cmd->get_subcommands().empty()) return;
    exitCode = show(*showArgs);
  });
}

}  // namespace ductus::supervisor
