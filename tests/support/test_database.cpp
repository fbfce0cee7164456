#include "tests/support/test_database.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>

#include "tests/support/test_env.h"

namespace ductus::test {

TestDatabase::TestDatabase() {
  admin_ = databaseUrl();
  if (admin_.empty()) return;
  static std::atomic<int> counter{0};
  name_ = "t_" + std::to_string(getpid()) + "_" + std::to_string(counter++) + "_" +
          std::to_string(std::chrono::steady_clock::now().time_since_epoch().count() % 100000);
  PGconn* a = PQconnectdb(admin_.c_str());
  PGresult* r = PQexec(a, ("CREATE DATABASE " + name_).c_str());
  if (PQresultStatus(r) != PGRES_COMMAND_OK) ADD_FAILURE() << PQerrorMessage(a);
  PQclear(r);
  PQfinish(a);
  // In a keyword/value string the last setting of a keyword wins.
  url_ = admin_ + " dbname=" + name_;
  conn_ = PQconnectdb(url_.c_str());
  if (PQstatus(conn_) != CONNECTION_OK) ADD_FAILURE() << PQerrorMessage(conn_);
}

TestDatabase::~TestDatabase() {
  if (conn_) PQfinish(conn_);
  if (name_.empty()) return;
  PGconn* a = PQconnectdb(admin_.c_str());
  PQclear(PQexec(a, ("DROP DATABASE IF EXISTS " + name_ + " WITH (FORCE)").c_str()));
  PQfinish(a);
}

PGconn* TestDatabase::connect() { return PQconnectdb(url_.c_str()); }

std::vector<std::string> TestDatabase::column(const std::string& sql,
                                              const std::vector<std::string>& params) {
  std::vector<const char*> values;
  for (auto& p : params) values.push_back(p.c_str());
  PGresult* r = PQexecParams(conn_, sql.c_str(), static_cast<int>(values.size()), nullptr,
                             values.data(), nullptr, nullptr, 0);
  std::vector<std::string> out;
  auto st = PQresultStatus(r);
  if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK) {
    ADD_FAILURE() << sql << ": " << PQerrorMessage(conn_);
  } else {
    for (int i = 0; i < PQntuples(r); ++i)
      out.emplace_back(PQgetvalue(r, i, 0), PQgetlength(r, i, 0));
  }
  PQclear(r);
  return out;
}

std::string TestDatabase::value(const std::string& sql, const std::vector<std::string>& params) {
  auto c = column(sql, params);
  return c.empty() ? "" : c[0];
}

}  // namespace ductus::test
