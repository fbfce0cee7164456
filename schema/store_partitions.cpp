// Partition maintenance: the time partitions of the coming days, created
// one table and tier per transaction (messages before deliveries, tiers in
// order), each in a statement of its own on one connection, so maintenance
// never holds two tables' locks at once. The SQL side is
// ductus_ensure_partitions (migration 0001): it looks in the catalog first,
// so with nothing to create it takes no lock at all, and it waits at most
// waitMs for a table's lock (a partition DDL queued behind a long query
// would hold up every insert behind it) unless tomorrow's partition is
// missing, when it waits for as long as it takes.

#include "common/log.h"
#include "schema/pg_error.h"
#include "schema/store.h"
#include "schema/store_sql.h"

namespace ductus::store {
namespace {

struct Step {
  const char* table;
  Tier tier;
};

constexpr Step kSteps[] = {
    {"messages", Tier::Week1},   {"deliveries", Tier::Week1}, {"messages", Tier::Week3},
    {"deliveries", Tier::Week3}, {"messages", Tier::Week7},   {"deliveries", Tier::Week7},
};

}  // namespace

void Store::ensurePartitions(PartitionOptions options, Callback<PartitionReport> cb) {
  static const Statement stmt{"ductus_ensure_partitions", sql::kEnsurePartitions};
  auto report = std::make_shared<PartitionReport>();
  auto next = std::make_shared<std::function<void(size_t)>>();
  std::weak_ptr<std::function<void(size_t)>> weakNext = next;
  *next = [this, options, report, weakNext, cb](size_t i) {
    auto keep = weakNext.lock();
    if (i == std::size(kSteps)) return cb(*report);
    const Step& step = kSteps[i];
    std::vector<Param> params{std::string(step.table),
                              std::to_string(static_cast<int16_t>(step.tier)),
                              options.firstDay,
                              std::to_string(options.daysAhead),
                              std::to_string(options.waitMs)};
    run(stmt, std::move(params), {}, false, [report, keep, i, step](Result<PgResult> r) {
      std::string what = std::string(step.table) + "_t" +
                         std::to_string(static_cast<int16_t>(step.tier));
      if (!r) {
        if (pg::lockNotAvailable(r.error())) {
          // lock_not_available: a long query holds the table; next hour.
          ++report->blocked;
          spdlog::info("partition maintenance of {} gave up waiting for its lock; retried later",
                       what);
        } else {
          report->errors.push_back(what + ": " + r.error().message);
        }
      } else {
        report->created += static_cast<int>(r->integer(0, 0));
        if (r->text(0, 1) == "t") {
          report->waited = true;
          spdlog::warn("tomorrow's partition of {} was missing: maintenance waited for its lock "
                       "as long as it took (inserts waited behind it)", what);
        }
      }
      (*keep)(i + 1);
    });
  };
  auto first = *next;
  first(0);
}

}  // namespace ductus::store
