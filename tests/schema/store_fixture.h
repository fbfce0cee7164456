// Test support for the store: a database of its own per test (created from
// DUCTUS_TEST_DATABASE_URL, dropped at the end, so ctest -j2 doesn't
// collide), a libuv loop, and a way to wait for one async answer.
#pragma once

#include <gtest/gtest.h>
#include <uv.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "schema/migrator.h"
#include "schema/pg_connection.h"
#include "schema/store.h"

namespace ductus::store::test {

// Runs the loop until start's callback has answered.
template <typename T>
Result<T> await(uv_loop_t* loop, std::function<void(std::function<void(Result<T>)>)> start) {
  std::optional<Result<T>> out;
  start([&](Result<T> r) { out = std::move(r); });
  while (!out && uv_run(loop, UV_RUN_ONCE)) {
  }
  if (!out) return Error{"the loop ran dry before an answer"};
  return std::move(*out);
}

// A conninfo equal to `url` but naming another database.
std::string withDatabase(const std::string& url, const std::string& dbname);

// CREATE DATABASE test_store_<random> on construction, DROP ... WITH (FORCE)
// on destruction.
class TestDatabase {
 public:
  TestDatabase();
  ~TestDatabase();
  const std::string& conninfo() const { return conninfo_; }
  const std::string& name() const { return name_; }

 private:
  std::string adminUrl_, name_, conninfo_;
};

// One statement on a private blocking-free connection of the test (its own
// loop): for arranging and checking rows.
class Sql {
 public:
  explicit Sql(const std::string& conninfo);
  ~Sql();
  Result<PgResult> operator()(const std::string& sql, std::vector<Param> params = {});
  // Sends without waiting; the answer arrives on a later run().
  void send(const std::string& sql, std::vector<Param> params,
            std::function<void(Result<PgResult>)> cb);
  uv_loop_t* loop() { return &loop_; }
  PgConnection& conn() { return *conn_; }

 private:
  uv_loop_t loop_;
  std::unique_ptr<PgConnection> conn_;
};

Status migrate(const std::string& conninfo);

// A migrated database, a Store on a loop, one interface with partitions.
class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  // Waits for a store call: run([&](auto cb) { store->insert(m, cb); }).
  template <typename T>
  Result<T> run(std::function<void(std::function<void(Result<T>)>)> start) {
    return await<T>(&loop_, std::move(start));
  }
  Result<StoredMessage> insert(NewMessage m);
  NewMessage message(std::string payload, std::vector<int64_t> destinations,
                     std::optional<std::string> dedupe = std::nullopt, int32_t lane = 0);
  // Reads every pending delivery of a destination (all lanes).
  std::vector<QueuedDelivery> queue(int64_t destination, std::vector<int32_t> lanes = {},
                                    int64_t after = 0);
  int64_t scalar(const std::string& sql, std::vector<Param> params = {});
  std::string text(const std::string& sql, std::vector<Param> params = {});

  size_t poolSize_ = 4;
  int64_t queueReadBytes_ = StoreOptions{}.queueReadBytes;
  std::unique_ptr<TestDatabase> db_;
  std::unique_ptr<Sql> sql_;
  uv_loop_t loop_;
  std::unique_ptr<Store> store_;
  int64_t iface_ = 0, destA_ = 0, destB_ = 0, destC_ = 0;
};

}  // namespace ductus::store::test
