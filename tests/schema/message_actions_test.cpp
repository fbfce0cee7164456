// The API's statements on messages, as the store runs them against a real
// cluster: the browser's keyset paging, one message with its deliveries,
// a resend of a quarantined delivery, a dismissal, an edited copy, and
// each action's audit statement in the same transaction (a failing one
// rolls the action back).
#include <gtest/gtest.h>

#include "schema/message_actions.h"
#include "schema/message_pages.h"
#include "tests/schema/store_fixture.h"

namespace ductus::store::test {
namespace {

class MessageActions : public StoreTest {
 protected:
  void SetUp() override {
    StoreTest::SetUp();
    if (HasFatalFailure()) return;
    ASSERT_TRUE((*sql_)("CREATE TABLE action_log (what text NOT NULL)").ok());
  }

  PgPool& pool() { return store_->sharedConnections(); }

  // A message with one delivery per destination, each quarantined after
  // `attempts` tries, and the message settled as quarantined.
  int64_t quarantined(const std::string& payload, std::vector<int64_t> dests, int attempts = 4) {
    auto m = insert(message(payload, dests));
    EXPECT_TRUE(m.ok()) << m.error().message;
    std::string id = std::to_string(m->ref.id);
    EXPECT_TRUE((*sql_)("UPDATE deliveries SET status = 3, attempts = $2::int4, last_error = "
                        "'refused' WHERE message_id = $1::int8",
                        {id, std::to_string(attempts)})
                    .ok());
    EXPECT_TRUE((*sql_)("UPDATE messages SET status = 3 WHERE id = $1::int8", {id}).ok());
    return m->ref.id;
  }

  std::string deliveries(int64_t id) {
    return text(
        "SELECT string_agg(destination_id || ':' || status || ':' || attempts || ':' || "
        "coalesce(last_error, ''), ' ' ORDER BY destination_id) FROM deliveries "
        "WHERE message_id = $1::int8",
        {std::to_string(id)});
  }

  // The audit statement the tests give: a row naming what was changed.
  template <typename T>
  AuditStatement<T> logRow(std::function<std::string(const T&)> what) {
    return [what](const T& x) -> Result<SqlStatement> {
      return SqlStatement{"INSERT INTO action_log VALUES ($1)", {what(x)}};
    };
  }
  // One that fails in the database, after the action's statements ran.
  template <typename T>
  AuditStatement<T> failingRow() {
    return [](const T&) -> Result<SqlStatement> {
      return SqlStatement{"INSERT INTO no_such_audit_table VALUES (1)", {}};
    };
  }
  int64_t logged() { return scalar("SELECT count(*) FROM action_log"); }
};

TEST_F(MessageActions, TheBrowserPagesNewestFirstByIdUntilNoNextIsGiven) {
  std::vector<int64_t> ids;
  for (int i = 0; i < 5; ++i) {
    auto m = insert(message("m" + std::to_string(i), {destA_}));
    ASSERT_TRUE(m.ok()) << m.error().message;
    ids.push_back(m->ref.id);
  }
  BrowseQuery q;
  q.limit = 2;
  std::vector<int64_t> seen;
  int pages = 0;
  for (;;) {
    auto p = run<MessagePage>(
        [&](auto cb) { messagePage(pool(), "adt-in", q, cb); });
    ASSERT_TRUE(p.ok()) << p.error().message;
    ASSERT_LE(p->rows.size(), 2u);
    for (auto& m : p->rows) {
      seen.push_back(m.id);
      EXPECT_EQ(m.status, MessageStatus::Pending);
      ASSERT_EQ(m.deliveries.size(), 1u);
      EXPECT_EQ(m.deliveries[0].status, MessageStatus::Pending);
    }
    ++pages;
    if (!p->next) break;
    EXPECT_EQ(*p->next, p->rows.back().id);
    q.before = p->next;
  }
  EXPECT_EQ(pages, 3);
  EXPECT_EQ(seen, std::vector<int64_t>(ids.rbegin(), ids.rend()));

  // A status filter, and an interface nobody has.
  quarantined("q", {destA_});
  q = {};
  q.status = MessageStatus::Quarantined;
  auto p = run<MessagePage>([&](auto cb) { messagePage(pool(), "adt-in", q, cb); });
  ASSERT_TRUE(p.ok()) << p.error().message;
  ASSERT_EQ(p->rows.size(), 1u);
  EXPECT_FALSE(p->next);
  auto none = run<MessagePage>([&](auto cb) { messagePage(pool(), "nosuch", q, cb); });
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().kind, ErrorKind::NotFound);
}

TEST_F(MessageActions, OneMessageShowsEachDeliveryWithItsLastError) {
  int64_t id = quarantined("MSH|x", {destA_, destB_}, 2);
  auto m = run<MessageDetail>([&](auto cb) { messageDetail(pool(), id, cb); });
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(m->interface, "adt-in");
  EXPECT_EQ(m->row.status, MessageStatus::Quarantined);
  EXPECT_EQ(m->bytes, 5);
  ASSERT_EQ(m->row.deliveries.size(), 2u);
  for (auto& d : m->row.deliveries) {
    EXPECT_EQ(d.status, MessageStatus::Quarantined);
    EXPECT_EQ(d.attempts, 2);
    EXPECT_EQ(d.lastError, "refused");
    EXPECT_FALSE(d.outputSaved);
  }
  auto none = run<MessageDetail>([&](auto cb) { messageDetail(pool(), id + 1000, cb); });
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().kind, ErrorKind::NotFound);
}

TEST_F(MessageActions, AResendMovesAQuarantinedDeliveryBackToPendingWithItsAuditRow) {
  int64_t id = quarantined("m", {destA_});
  auto r = run<Resent>([&](auto cb) {
    resendMessages(pool(), {id}, std::nullopt,
                   logRow<Resent>([](const Resent& x) {
                     return "resent " + std::to_string(x.deliveries.size());
                   }),
                   cb);
  });
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->deliveries.size(), 1u);
  EXPECT_EQ(r->deliveries[0].messageId, id);
  EXPECT_EQ(r->deliveries[0].interface, "adt-in");
  EXPECT_EQ(r->messagesResent, 1);
  // Pending again in place, its attempts kept, its error cleared.
  EXPECT_EQ(deliveries(id), std::to_string(destA_) + ":0:4:");
  EXPECT_EQ(scalar("SELECT status FROM messages WHERE id = $1::int8", {std::to_string(id)}), 0);
  EXPECT_EQ(text("SELECT what FROM action_log"), "resent 1");
  EXPECT_EQ(queue(destA_).size(), 1u);

  // Nothing quarantined any more: nothing to change, and no row.
  auto again = run<Resent>([&](auto cb) {
    resendMessages(pool(), {id}, std::nullopt, logRow<Resent>([](auto&) { return "x"; }), cb);
  });
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().kind, ErrorKind::NothingToChange);
  EXPECT_EQ(logged(), 1);
  auto missing = run<Resent>([&](auto cb) {
    resendMessages(pool(), {id, id + 1000}, std::nullopt,
                   logRow<Resent>([](auto&) { return "x"; }), cb);
  });
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().kind, ErrorKind::NotFound);
  EXPECT_EQ(missing.error().message, "no message " + std::to_string(id + 1000));
}

TEST_F(MessageActions, AFailingAuditStatementRollsTheActionBack) {
  int64_t id = quarantined("m", {destA_, destB_});
  std::string before = deliveries(id);
  auto resent = run<Resent>([&](auto cb) {
    resendMessages(pool(), {id}, std::nullopt, failingRow<Resent>(), cb);
  });
  ASSERT_FALSE(resent.ok());
  EXPECT_EQ(resent.error().kind, ErrorKind::Database);
  auto dismissed = run<Dismissed>([&](auto cb) {
    dismissMessage(pool(), id, "dismissed by test: no", failingRow<Dismissed>(), cb);
  });
  ASSERT_FALSE(dismissed.ok());
  // An audit statement the caller could not make ends it the same way.
  auto refused = run<Dismissed>([&](auto cb) {
    dismissMessage(
        pool(), id, "why",
        [](const Dismissed&) -> Result<SqlStatement> {
          return Error{"no audit row", ErrorKind::Unavailable};
        },
        cb);
  });
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().kind, ErrorKind::Unavailable);
  EXPECT_EQ(deliveries(id), before);
  EXPECT_EQ(scalar("SELECT status FROM messages WHERE id = $1::int8", {std::to_string(id)}), 3);
  EXPECT_TRUE(queue(destA_).empty());
  EXPECT_EQ(logged(), 0);
}

TEST_F(MessageActions, ADismissalFiltersTheQuarantinedDeliveriesAndSettlesTheMessage) {
  int64_t id = quarantined("m", {destA_, destB_});
  // destB_ had sent: the message stays sent once A's quarantine is gone.
  ASSERT_TRUE((*sql_)("UPDATE deliveries SET status = 1 WHERE message_id = $1::int8 AND "
                      "destination_id = $2::int8",
                      {std::to_string(id), std::to_string(destB_)})
                  .ok());
  auto r = run<Dismissed>([&](auto cb) {
    dismissMessage(pool(), id, "dismissed by ops: known bad",
                   logRow<Dismissed>([](const Dismissed& x) { return x.interface; }), cb);
  });
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->destinations, std::vector<std::string>{"a"});
  EXPECT_EQ(r->messageStatus, MessageStatus::Sent);
  EXPECT_EQ(deliveries(id), std::to_string(destA_) + ":2:4:dismissed by ops: known bad " +
                                std::to_string(destB_) + ":1:4:refused");
  EXPECT_EQ(text("SELECT what FROM action_log"), "adt-in");
}

TEST_F(MessageActions, AnEditedCopyReplacesTheQuarantineButNotWhileADeliveryIsPending) {
  auto pending = insert(message("m", {destA_}));
  ASSERT_TRUE(pending.ok());
  EditedCopy copy;
  copy.original = pending->ref.id;
  copy.tier = static_cast<int16_t>(pending->ref.tier);
  copy.destinationIds = {destA_, destB_};
  copy.payload = "MSH|fixed\\X0D\\";
  auto refused = run<CopyStored>([&](auto cb) {
    storeEditedCopy(pool(), copy, logRow<CopyStored>([](auto&) { return "x"; }), cb);
  });
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().kind, ErrorKind::StillPending);

  int64_t id = quarantined("bad", {destA_});
  copy.original = id;
  auto r = run<CopyStored>([&](auto cb) {
    storeEditedCopy(pool(), copy,
                    logRow<CopyStored>([](const CopyStored& x) {
                      return "copy " + std::to_string(x.copyId);
                    }),
                    cb);
  });
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->copyStatus, MessageStatus::Pending);
  EXPECT_EQ(r->replaced, std::vector<std::string>{"a"});
  EXPECT_EQ(r->originalStatus, MessageStatus::Filtered);
  std::string copyId = std::to_string(r->copyId);
  EXPECT_EQ(text("SELECT what FROM action_log"), "copy " + copyId);
  EXPECT_EQ(text("SELECT convert_from(payload, 'UTF8') FROM messages WHERE id = $1::int8", {copyId}), "MSH|fixed\\X0D\\");
  EXPECT_EQ(scalar("SELECT origin_id FROM messages WHERE id = $1::int8", {copyId}), id);
  EXPECT_EQ(deliveries(id), std::to_string(destA_) + ":2:4:replaced by edited copy " + copyId);
  EXPECT_EQ(scalar("SELECT count(*) FROM deliveries WHERE message_id = $1::int8 AND status = 0",
                   {copyId}),
            2);
}

}  // namespace
}  // namespace ductus::store::test
