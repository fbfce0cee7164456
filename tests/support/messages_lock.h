// Holds LOCK TABLE messages IN EXCLUSIVE MODE on a connection of the test's
// own until release(): every insert into messages (and so every intake
// commit) waits for it, while reads still answer. For the tests that an
// acknowledgement, a 202 or a file's move comes only after the commit.
#pragma once

#include <gtest/gtest.h>
#include <libpq-fe.h>

#include <chrono>
#include <string>

#include "tests/support/e2e.h"
#include "tests/support/test_database.h"

namespace ductus::test {

class MessagesLock {
 public:
  explicit MessagesLock(TestDatabase& db) : conn_(db.connect()) {
    PQclear(PQexec(conn_, "BEGIN"));
    PGresult* r = PQexec(conn_, "LOCK TABLE messages IN EXCLUSIVE MODE");
    ok_ = PQresultStatus(r) == PGRES_COMMAND_OK;
    if (!ok_) ADD_FAILURE() << PQerrorMessage(conn_);
    PQclear(r);
  }
  ~MessagesLock() { release(); }
  MessagesLock(const MessagesLock&) = delete;
  MessagesLock& operator=(const MessagesLock&) = delete;
  void release() {
    if (!conn_) return;
    PQclear(PQexec(conn_, "COMMIT"));
    PQfinish(conn_);
    conn_ = nullptr;
  }
  bool ok() const { return ok_; }

 private:
  PGconn* conn_;
  bool ok_ = false;
};

// A session of the engine waits on a lock: its insert is in flight.
inline bool anInsertWaits(TestDatabase& db) {
  return waitFor(
      [&] {
        return db.value("SELECT count(*) FROM pg_stat_activity WHERE datname = "
                        "current_database() AND wait_event_type = 'Lock'") != "0";
      },
      std::chrono::seconds(30));
}

}  // namespace ductus::test
