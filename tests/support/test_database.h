// TestDatabase: a database of its own for one test, created on the
// throwaway cluster (DUCTUS_TEST_DATABASE_URL) and dropped afterwards, so
// tests running side by side (ctest -j) never see each other's rows.
// Blocking libpq: tests may block.
#pragma once

#include <libpq-fe.h>

#include <string>
#include <vector>

namespace ductus::test {

class TestDatabase {
 public:
  TestDatabase();  // ADD_FAILURE()s when the cluster is missing
  ~TestDatabase();
  TestDatabase(const TestDatabase&) = delete;
  TestDatabase& operator=(const TestDatabase&) = delete;

  const std::string& url() const { return url_; }
  // Runs sql (with text params) and returns the first column of each row;
  // ADD_FAILURE() on an error.
  std::vector<std::string> column(const std::string& sql,
                                  const std::vector<std::string>& params = {});
  // The single value of a one-row, one-column query ("" if none).
  std::string value(const std::string& sql, const std::vector<std::string>& params = {});
  // A connection of the test's own (e.g. to hold a lock), closed by the caller.
  PGconn* connect();

 private:
  std::string admin_;
  std::string name_;
  std::string url_;
  PGconn* conn_ = nullptr;
};

}  // namespace ductus::test
