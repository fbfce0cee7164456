#include "schema/pg_transaction.h"

#include <memory>

#include "schema/pg_error.h"

namespace ductus::store {
namespace {

struct Tx {
  PgConnection& conn;
  std::vector<TxStep> steps;
  TxDone done;
  std::vector<PgResult> results;
  size_t next = 0;
};

void rollback(std::shared_ptr<Tx> tx, Error why) {
  tx->conn.script("ROLLBACK", [tx, why = std::move(why)](Result<PgResult>) {
    tx->done(std::move(why));
  });
}

void step(std::shared_ptr<Tx> tx) {
  if (tx->next == tx->steps.size()) {
    tx->conn.script("COMMIT", [tx](Result<PgResult> r) {
      if (!r) return tx->done(r.error());
      tx->done(std::move(tx->results));
    });
    return;
  }
  auto s = tx->steps[tx->next++](tx->results);
  if (!s) return rollback(tx, s.error());
  tx->conn.query(std::move(s->sql), std::move(s->params), [tx](Result<PgResult> r) {
    if (!r) return rollback(tx, r.error());
    tx->results.push_back(std::move(*r));
    step(tx);
  });
}

}  // namespace

void runTransaction(PgConnection& conn, std::vector<TxStep> steps, TxDone done) {
  auto tx = std::make_shared<Tx>(Tx{conn, std::move(steps), std::move(done), {}, 0});
  conn.script("BEGIN", [tx](Result<PgResult> r) {
    if (!r) return tx->done(r.error());
    step(tx);
  });
}

void runTransactionRetried(PgPool::LeasePtr lease, std::vector<TxStep> steps, TxDone done,
                           int tries) {
  PgConnection& conn = lease->conn();
  runTransaction(conn, steps, [lease, steps, done, tries](Result<std::vector<PgResult>> r) mutable {
    if (!r && tries > 1 && pg::retryable(r.error()))
      return runTransactionRetried(lease, std::move(steps), std::move(done), tries - 1);
    done(std::move(r));
  });
}

TxStep fixedStep(SqlStatement s) {
  return [s = std::move(s)](const std::vector<PgResult>&) -> Result<SqlStatement> { return s; };
}

}  // namespace ductus::store
