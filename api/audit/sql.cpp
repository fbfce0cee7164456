#include "api/audit/sql.h"

#include <ctime>
#include <memory>

namespace ductus::api {

Clock systemClock() {
  return [] { return std::chrono::system_clock::now(); };
}

std::string pgTime(TimePoint t) {
  using namespace std::chrono;
  auto us = duration_cast<microseconds>(t.time_since_epoch()).count();
  std::time_t secs = static_cast<std::time_t>(us / 1000000);
  long frac = static_cast<long>(us % 1000000);
  if (frac < 0) {
    frac += 1000000;
    --secs;
  }
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02d %02d:%02d:%02d.%06ld+00", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, frac);
  return buf;
}

namespace {

struct Tx {
  store::PgConnection& conn;
  std::vector<TxStep> steps;
  TxDone done;
  std::vector<store::PgResult> results;
  size_t next = 0;
};

void rollback(std::shared_ptr<Tx> tx, Error why) {
  tx->conn.script("ROLLBACK", [tx, why = std::move(why)](Result<store::PgResult>) {
    tx->done(std::move(why));
  });
}

void step(std::shared_ptr<Tx> tx) {
  if (tx->next == tx->steps.size()) {
    tx->conn.script("COMMIT", [tx](Result<store::PgResult> r) {
      if (!r) return tx->done(r.error());
      tx->done(std::move(tx->results));
    });
    return;
  }
  auto s = tx->steps[tx->next++](tx->results);
  if (!s) return rollback(tx, s.error());
  tx->conn.query(std::move(s->sql), std::move(s->params), [tx](Result<store::PgResult> r) {
    if (!r) return rollback(tx, r.error());
    tx->results.push_back(std::move(*r));
    step(tx);
  });
}

}  // namespace

void runTransaction(store::PgConnection& conn, std::vector<TxStep> steps, TxDone done) {
  auto tx = std::make_shared<Tx>(Tx{conn, std::move(steps), std::move(done), {}, 0});
  conn.script("BEGIN", [tx](Result<store::PgResult> r) {
    if (!r) return tx->done(r.error());
    step(tx);
  });
}

TxStep fixedStep(SqlStatement s) {
  return [s = std::move(s)](const std::vector<store::PgResult>&) -> Result<SqlStatement> {
    return s;
  };
}

std::vector<std::string> parseTextArray(std::string_view text) {
  std::vector<std::string> out;
  if (text.size() < 2 || text.front() != '{' || text.back() != '}') return out;
  text = text.substr(1, text.size() - 2);
  while (!text.empty()) {
    auto comma = text.find(',');
    auto item = text.substr(0, comma);
    if (item.size() >= 2 && item.front() == '"') item = item.substr(1, item.size() - 2);
    if (!item.empty()) out.emplace_back(item);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return out;
}

}  // namespace ductus::api
