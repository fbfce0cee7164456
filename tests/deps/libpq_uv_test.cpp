// libpq runs a parameterized query against the throwaway cluster from a
// libuv loop without blocking it: a 10 ms timer keeps firing between the
// connection's start and the answer of a query the server sleeps in.
#include <gtest/gtest.h>
#include <uv.h>

#include "schema/pg_connection.h"
#include "tests/support/test_env.h"

namespace ductus::store {
namespace {

TEST(LibpqOnLibuv, AParameterizedQueryRunsWithoutBlockingTheLoop) {
  std::string url = test::databaseUrl();
  ASSERT_FALSE(url.empty());
  uv_loop_t loop;
  ASSERT_EQ(uv_loop_init(&loop), 0);
  // Ticks counted from the connect's answer to the query's: a query that
  // blocked the loop would leave none there, however many came before.
  struct Ticks {
    bool connected = false, done = false;
    int during = 0;
  } ticks;
  bool& done = ticks.done;
  std::string answer;
  {
    PgConnection conn(&loop);
    uv_timer_t timer;
    uv_timer_init(&loop, &timer);
    timer.data = &ticks;
    uv_timer_start(
        &timer,
        [](uv_timer_t* t) {
          auto* k = static_cast<Ticks*>(t->data);
          if (k->connected && !k->done) ++k->during;
        },
        10, 10);

    conn.connect(url, [&](Status s) {
      ASSERT_TRUE(s.ok()) << s.error().message;
      ticks.connected = true;
    });
    // The value travels as a bound parameter; an injection attempt is data.
    conn.query("SELECT $1::text || '!', pg_sleep(0.3)", {std::string("x'); DROP TABLE t; --")},
               [&](Result<PgResult> r) {
                 ASSERT_TRUE(r.ok()) << r.error().message;
                 answer = std::string(r->text(0, 0));
                 done = true;
                 uv_timer_stop(&timer);
                 uv_close(reinterpret_cast<uv_handle_t*>(&timer), nullptr);
               });
    while (!done && uv_run(&loop, UV_RUN_ONCE)) {
    }
  }
  uv_run(&loop, UV_RUN_DEFAULT);
  EXPECT_EQ(uv_loop_close(&loop), 0);
  EXPECT_TRUE(done);
  EXPECT_EQ(answer, "x'); DROP TABLE t; --!");
  // Some 30 in the 300 ms the server sleeps; a few are proof enough on a
  // busy machine.
  EXPECT_GE(ticks.during, 3);
}

TEST(LibpqOnLibuv, AServerErrorCarriesItsSqlstate) {
  std::string url = test::databaseUrl();
  ASSERT_FALSE(url.empty());
  uv_loop_t loop;
  uv_loop_init(&loop);
  std::optional<Error> err;
  {
    PgConnection conn(&loop);
    conn.connect(url, [](Status) {});
    conn.query("SELECT 1/0", {}, [&](Result<PgResult> r) {
      if (!r) err = r.error();
    });
    conn.query("SELECT 2", {}, [&](Result<PgResult> r) {
      // The connection is still usable after a statement error.
      ASSERT_TRUE(r.ok());
      EXPECT_EQ(r->text(0, 0), "2");
      uv_stop(&loop);
    });
    uv_run(&loop, UV_RUN_DEFAULT);
  }
  uv_run(&loop, UV_RUN_DEFAULT);
  uv_loop_close(&loop);
  ASSERT_TRUE(err.has_value());
  EXPECT_EQ(err->kind, ErrorKind::Database);
  EXPECT_EQ(err->sqlstate, "22012");  // division_by_zero: what PostgreSQL said, kept
  EXPECT_NE(err->message.find("division by zero"), std::string::npos);
}

TEST(LibpqOnLibuv, AnUnreachableServerIsAnErrorNotAHang) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  std::optional<Status> result;
  {
    PgConnection conn(&loop);
    conn.connect("host=/nonexistent-ductus-dir port=1 connect_timeout=2",
                 [&](Status s) { result = s; });
    uv_run(&loop, UV_RUN_DEFAULT);
  }
  uv_run(&loop, UV_RUN_DEFAULT);
  uv_loop_close(&loop);
  ASSERT_TRUE(result.has_value());
  EXPECT_FALSE(result->ok());
}

}  // namespace
}  // namespace ductus::store
