#include "api/auth/directory_refresh.h"

#include <algorithm>
#include <string>
#include <vector>

#include "common/log.h"

namespace ductus::api {
namespace {

using store::PgResult;
using Results = std::vector<PgResult>;
using LeasePtr = store::PgPool::LeasePtr;

struct DirectoryUserRow {
  int64_t id = 0;
  std::string name;
  Role role = Role::Viewer;
};

AuditEntry engineEntry(const DirectoryUserRow& u, AuditAction action) {
  AuditEntry e;
  e.actor = "directory";
  e.actorKind = ActorKind::System;
  e.via = "engine";
  e.action = action.str();
  e.targetKind = "user";
  e.targetId = std::to_string(u.id);
  e.targetName = u.name;
  return e;
}

}  // namespace

struct DirectoryRefresh::Round {
  std::vector<DirectoryUserRow> users;
  std::vector<DirectoryLookup> found;                  // users' order
  std::vector<std::string> checked;                    // ids unchanged
  DirectoryRefreshReport report;
  std::string now;
  std::function<void(Result<DirectoryRefreshReport>)> done;
};

DirectoryRefresh::DirectoryRefresh(uv_loop_t* loop, store::PgPool& pool, Directory& directory,
                                   AuditLog& audit)
    : loop_(loop), pool_(pool), directory_(directory), audit_(audit) {}

DirectoryRefresh::~DirectoryRefresh() { *alive_ = false; }

void DirectoryRefresh::start() {
  auto every = std::max<int64_t>(1000, directory_.settings().refresh.count());
  timer_ = makeTimer(loop_, this);
  uv_timer_start(
      timer_.get(),
      [](uv_timer_t* t) {
        auto* self = static_cast<DirectoryRefresh*>(t->data);
        if (!self || self->running_) return;
        self->run([](Result<DirectoryRefreshReport> r) {
          if (!r)
            return spdlog::warn(
                "directory refresh: {}; directory users keep their sessions until the next "
                "round reaches the directory (auth.ldap.refresh)",
                r.error().message);
          if (r->unknown)
            spdlog::warn(
                "directory refresh: {} directory user(s) could not be read and keep "
                "their access until a round reads them (first: {})",
                r->unknown, r->firstUnknown);
          if (r->left || r->roleChanged)
            spdlog::info(
                "directory refresh: {} directory user(s) checked, {} left (sessions "
                "ended, tokens revoked), {} with a new role",
                r->checked, r->left, r->roleChanged);
        });
      },
      static_cast<uint64_t>(std::min<int64_t>(every, 30'000)), static_cast<uint64_t>(every));
}

void DirectoryRefresh::run(std::function<void(Result<DirectoryRefreshReport>)> done) {
  if (running_) return done(Error{"a directory refresh is under way", ErrorKind::Busy});
  running_ = true;
  auto round = std::make_shared<Round>();
  round->done = std::move(done);
  round->now = pgTime(audit_.clock()());
  auto alive = alive_;
  pool_.acquire([this, alive, round](Result<LeasePtr> lease) {
    if (!*alive) return;
    if (!lease) return finish(round, lease.error());
    auto l = *lease;
    l->conn().query(
        "SELECT id, name, role FROM users WHERE source = 'ldap' AND NOT disabled "
        "AND directory_left_at IS NULL ORDER BY id",
        {}, [this, alive, l, round](Result<PgResult> r) {
          if (!*alive) return;
          if (!r) return finish(round, r.error());
          for (int i = 0; i < r->rows(); ++i)
            round->users.push_back({r->integer(i, 0), std::string(r->text(i, 1)),
                                    roleFromName(r->text(i, 2)).value_or(Role::Viewer)});
          lookUpNext(round);
        });
  });
}

void DirectoryRefresh::lookUpNext(std::shared_ptr<Round> round) {
  size_t from = round->found.size();
  if (from == round->users.size()) return applyNext(round, 0);
  std::vector<std::string> names;
  for (size_t i = from; i < round->users.size() && names.size() < kBatch; ++i)
    names.push_back(round->users[i].name);
  auto alive = alive_;
  directory_.lookUp(std::move(names), [this, alive, round](Result<std::vector<DirectoryLookup>> r) {
    if (!*alive) return;
    // Nothing is changed on half an answer.
    if (!r) return finish(round, r.error());
    for (auto& e : *r) round->found.push_back(std::move(e));
    lookUpNext(round);
  });
}

void DirectoryRefresh::applyNext(std::shared_ptr<Round> round, size_t i) {
  auto alive = alive_;
  // The unchanged, and those this round could not read (they keep what they
  // have), need no statement: passed over in a loop, as a call per user
  // would nest as deep as there are users.
  for (; i < round->users.size(); ++i) {
    const DirectoryLookup& f = round->found[i];
    const DirectoryUserRow& u = round->users[i];
    if (f.outcome == DirectoryLookup::Outcome::Unknown) {
      if (round->report.unknown++ == 0) round->report.firstUnknown = u.name + ": " + f.error;
      continue;
    }
    if (f.outcome == DirectoryLookup::Outcome::Found && f.entry.role && *f.entry.role == u.role) {
      round->checked.push_back(std::to_string(u.id));
      continue;
    }
    break;
  }
  // Past the last user: the unchanged ones marked checked, in one statement.
  if (i == round->users.size()) {
    round->report.checked = static_cast<int64_t>(round->users.size());
    if (round->checked.empty()) return finish(round, round->report);
    std::string ids = "{";
    for (size_t k = 0; k < round->checked.size(); ++k) ids += (k ? "," : "") + round->checked[k];
    ids += "}";
    pool_.acquire([this, alive, round, ids](Result<LeasePtr> lease) {
      if (!*alive) return;
      if (!lease) return finish(round, lease.error());
      auto l = *lease;
      l->conn().query("UPDATE users SET directory_checked_at = $1 WHERE id = ANY ($2::bigint[])",
                      {round->now, ids}, [this, alive, l, round](Result<PgResult> r) {
                        if (!*alive) return;
                        if (!r) return finish(round, r.error());
                        finish(round, round->report);
                      });
    });
    return;
  }
  const DirectoryUserRow& u = round->users[i];
  const DirectoryEntry* entry =
      round->found[i].outcome == DirectoryLookup::Outcome::Found ? &round->found[i].entry : nullptr;
  std::vector<TxStep> steps;
  bool left = !entry || !entry->role;
  if (left) {
    std::string reason = !entry ? "no longer in the directory" : "in no group that has a role here";
    std::string id = std::to_string(u.id);
    std::string now = round->now;
    // Only if no sign-in or admin changed the row meanwhile.
    steps.push_back(fixedStep(
        {"UPDATE users SET directory_left_at = $2, directory_checked_at = $2, updated_at = $2 "
         "WHERE id = $1 AND source = 'ldap' AND directory_left_at IS NULL RETURNING id",
         {id, now}}));
    steps.push_back([id](const Results& r) -> Result<SqlStatement> {
      if (r[0].rows() == 0) return Error{"changed meanwhile", ErrorKind::Conflict};
      return SqlStatement{"DELETE FROM sessions WHERE user_id = $1", {id}};
    });
    steps.push_back([id, now](const Results&) -> Result<SqlStatement> {
      return SqlStatement{
          "UPDATE api_tokens SET revoked_at = $2 WHERE user_id = $1 AND revoked_at IS NULL",
          {id, now}};
    });
    steps.push_back([this, u, reason, groups = entry ? entry->groups : std::vector<std::string>{}](
                        const Results& r) -> Result<SqlStatement> {
      auto e = engineEntry(u, "user.directory_left");
      e.detail["reason"] = reason;
      e.detail["sessionsEnded"] = r[1].affected();
      e.detail["tokensRevoked"] = r[2].affected();
      if (!groups.empty()) e.detail["groups"] = groups;
      return audit_.statement(e);
    });
  } else {
    std::string id = std::to_string(u.id);
    steps.push_back(
        fixedStep({"UPDATE users SET role = $2, directory_checked_at = $3, "
                   "external_id = $4, updated_at = $3 "
                   "WHERE id = $1 AND source = 'ldap' AND role = $5 RETURNING id",
                   {id, std::string(roleName(*entry->role)), round->now, entry->dn,
                    std::string(roleName(u.role))}}));
    steps.push_back([this, u, to = *entry->role,
                     groups = entry->groups](const Results& r) -> Result<SqlStatement> {
      if (r[0].rows() == 0) return Error{"changed meanwhile", ErrorKind::Conflict};
      auto e = engineEntry(u, "user.role");
      e.detail["from"] = std::string(roleName(u.role));
      e.detail["to"] = std::string(roleName(to));
      e.detail["groups"] = groups;
      return audit_.statement(e);
    });
  }
  pool_.acquire(
      [this, alive, round, i, left, steps = std::move(steps)](Result<LeasePtr> lease) mutable {
        if (!*alive) return;
        if (!lease) return finish(round, lease.error());
        auto l = *lease;
        runTransaction(
            l->conn(), std::move(steps), [this, alive, l, round, i, left](Result<Results> r) {
              if (!*alive) return;
              // A row a sign-in or an admin changed meanwhile is
              // theirs; the next round looks again.
              if (!r && r.error().kind != ErrorKind::Conflict) return finish(round, r.error());
              if (r) {
                const auto& u = round->users[i];
                if (left) {
                  ++round->report.left;
                  spdlog::info(
                      "directory: {} {}; their sessions ended and tokens "
                      "revoked",
                      u.name,
                      round->found[i].outcome == DirectoryLookup::Outcome::Found
                          ? "is in no group that has a role here"
                          : "is no longer in the directory");
                } else {
                  ++round->report.roleChanged;
                  spdlog::info("directory: {} is now {} (was {}), as their groups say", u.name,
                               roleName(*round->found[i].entry.role), roleName(u.role));
                }
              }
              applyNext(round, i + 1);
            });
      });
}

void DirectoryRefresh::finish(std::shared_ptr<Round> round, Result<DirectoryRefreshReport> r) {
  running_ = false;
  auto done = std::move(round->done);
  done(std::move(r));
}

}  // namespace ductus::api
