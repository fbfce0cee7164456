// DirectoryRefresh: the round that makes the directory's word hold between
// sign-ins. A person who left the hospital, or lost every group that has a
// role here, must stop being able to use the engine without anyone
// remembering it: every auth.ldap.refresh (15 minutes unless set) each
// directory user who may still sign in is looked up with the service bind.
//
//   gone from the directory, or in no mapped group: directory_left_at set,
//     their sessions deleted and their tokens revoked, one transaction with
//     its audit row (user.directory_left), so the next call of any of them
//     is 401;
//   their groups now give another role: the role changed (user.role), which
//     every session and token of theirs sees on its next call;
//   else: directory_checked_at.
//
// A directory that can't be asked changes nothing (logged; the next round
// tries again): not knowing is not a reason to lock everyone out, and the
// sessions still end at their own limits.
#pragma once

#include <uv.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "api/audit/audit_log.h"
#include "api/auth/directory.h"
#include "common/result.h"
#include "common/uv_handle.h"
#include "schema/pg_pool.h"

namespace ductus::api {

struct DirectoryRefreshReport {
  int64_t checked = 0;      // directory users looked up
  int64_t left = 0;         // of them, gone or in no mapped group
  int64_t roleChanged = 0;  // of them, with a new role
  // Of them, those whose search failed alone (more groups than a search
  // answers, say): unchanged, and said in a warning.
  int64_t unknown = 0;
  std::string firstUnknown;  // "name: why"
};

class DirectoryRefresh {
 public:
  // Users looked up per exchange with the directory (one connection each).
  static constexpr size_t kBatch = 500;

  // pool, directory and audit must outlive it.
  DirectoryRefresh(uv_loop_t* loop, store::PgPool& pool, Directory& directory, AuditLog& audit);
  ~DirectoryRefresh();
  DirectoryRefresh(const DirectoryRefresh&) = delete;
  DirectoryRefresh& operator=(const DirectoryRefresh&) = delete;

  // The timer: the first round after min(refresh, 30 s), so people who
  // left while the engine was down are found soon after it starts, then
  // every refresh.
  void start();
  // One round now (the timer's, and the tests'). A round already under way
  // answers Busy.
  void run(std::function<void(Result<DirectoryRefreshReport>)> done);

 private:
  struct Round;
  void lookUpNext(std::shared_ptr<Round> round);
  void applyNext(std::shared_ptr<Round> round, size_t i);
  void finish(std::shared_ptr<Round> round, Result<DirectoryRefreshReport> r);

  uv_loop_t* loop_;
  store::PgPool& pool_;
  Directory& directory_;
  AuditLog& audit_;
  UvHandle<uv_timer_t> timer_;
  bool running_ = false;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace ductus::api
