// GET /api/v1/event-log over real HTTP and a real PostgreSQL: the engine's
// events newest first, filtered by kind, interface and time, paged with
// `next`; each bad parameter refused with a 400 that names it; a viewer
// may read them, nobody unsigned.
#include <gtest/gtest.h>

#include "api/event_routes.h"
#include "tests/api/auth_fixture.h"

namespace ductus::api::test {
namespace {

class EventRoutesTest : public AuthFixture {
 protected:
  void SetUp() override {
    AuthFixture::SetUp();
    if (HasFatalFailure()) return;
    serveWith([&] { return eventRoutes(deps_.get()); });
    if (HasFatalFailure()) return;
    db_.value(
        "INSERT INTO events (at, kind, interface, destination, message_id, detail) VALUES "
        "('2026-01-01T00:00:00Z', 'ar_refused', 'adt', NULL, NULL, 'from 127.0.0.1:1: no MSH "
        "segment; answered AR'), "
        "('2026-01-01T00:01:00Z', 'delivery_quarantined', 'lab', 'ehr', 42, 'gave up after 3 "
        "attempts: connection refused'), "
        "('2026-01-01T00:02:00Z', 'worker_restarted', NULL, NULL, NULL, 'worker 9 (pool "
        "shared) exited signal 9'), "
        "('2026-01-01T00:03:00Z', 'runaway', 'adt', 'default', 7, 'the script ran past its "
        "timeout')");
    viewer_ = makeToken("watcher", Role::Viewer, kNoPermission).token;
  }
  ductus::test::HttpReply list(const std::string& query) {
    return call("GET", "/api/v1/event-log" + query, bearer(viewer_));
  }
  std::string viewer_;
};

TEST_F(EventRoutesTest, AViewerReadsThemNewestFirstFilteredAndPaged) {
  auto r = list("");
  ASSERT_EQ(r.status, 200) << r.body;
  auto b = bodyOf(r);
  ASSERT_EQ(b["events"].size(), 4u) << b.dump();
  EXPECT_TRUE(b["next"].is_null()) << "a page not full has no older page";
  auto& newest = b["events"][0];
  EXPECT_EQ(newest["kind"], "runaway");
  EXPECT_EQ(newest["at"], "2026-01-01T00:03:00.000Z");
  EXPECT_EQ(newest["interface"], "adt");
  EXPECT_EQ(newest["destination"], "default");
  EXPECT_EQ(newest["messageId"], 7);
  EXPECT_TRUE(b["events"][1]["interface"].is_null());
  EXPECT_TRUE(b["events"][1]["messageId"].is_null());

  b = bodyOf(list("?kind=delivery_quarantined"));
  ASSERT_EQ(b["events"].size(), 1u);
  EXPECT_EQ(b["events"][0]["destination"], "ehr");
  EXPECT_EQ(b["events"][0]["messageId"], 42);
  b = bodyOf(list("?interface=adt"));
  ASSERT_EQ(b["events"].size(), 2u);
  b = bodyOf(list("?interface=adt&kind=ar_refused"));
  ASSERT_EQ(b["events"].size(), 1u);
  b = bodyOf(list("?since=2026-01-01T00:01:30Z"));
  EXPECT_EQ(b["events"].size(), 2u) << b.dump();

  // Two a page: the second page starts below the first one's last.
  b = bodyOf(list("?limit=2"));
  ASSERT_EQ(b["events"].size(), 2u);
  ASSERT_TRUE(b["next"].is_number()) << b.dump();
  EXPECT_EQ(b["next"], b["events"][1]["id"]);
  auto older = bodyOf(list("?limit=2&before=" + std::to_string(b["next"].get<int64_t>())));
  ASSERT_EQ(older["events"].size(), 2u);
  EXPECT_EQ(older["events"][0]["kind"], "delivery_quarantined");
  EXPECT_EQ(older["events"][1]["kind"], "ar_refused");
}

TEST_F(EventRoutesTest, EachBadParameterIsRefusedByName) {
  auto expect400 = [&](const std::string& query, const std::string& says) {
    auto r = list(query);
    EXPECT_EQ(r.status, 400) << query << ": " << r.body;
    EXPECT_NE(r.body.find(says), std::string::npos) << query << ": " << r.body;
  };
  expect400("?kind=nonsense", "`kind` must be one of ar_refused, delivery_quarantined");
  expect400("?since=yesterday", "`since` must be an RFC 3339 time");
  expect400("?before=abc", "`before` must be a whole number");
  expect400("?before=0", "`before` must be an event id");
  expect400("?limit=0", "`limit` must be 1 to 500");
  expect400("?limit=501", "`limit` must be 1 to 500");
  expect400("?interface=" + std::string(201, 'a'), "`interface` is at most 200 bytes");
  expect400("?until=2026-01-01T00:00:00Z", "until");
  EXPECT_EQ(list("?limit=500").status, 200);
  EXPECT_EQ(list("?kind=").status, 200) << "an empty filter is no filter";
}

TEST_F(EventRoutesTest, EveryRoleMayReadThemAndNobodyUnsigned) {
  EXPECT_EQ(call("GET", "/api/v1/event-log").status, 401);
  auto ops = makeToken("ops", Role::Operator, kNoPermission).token;
  auto admin = makeToken("root", Role::Admin, kNoPermission).token;
  EXPECT_EQ(call("GET", "/api/v1/event-log", bearer(ops)).status, 200);
  EXPECT_EQ(call("GET", "/api/v1/event-log", bearer(admin)).status, 200);
}

}  // namespace
}  // namespace ductus::api::test
