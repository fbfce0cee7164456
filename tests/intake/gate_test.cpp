#include "intake/gate.h"

#include <gtest/gtest.h>

namespace ductus::intake {
namespace {

TEST(Gate, AClosedGateRefusesNewPasses) {
  auto g = Gate::make();
  g->close();
  EXPECT_FALSE(g->enter().has_value());
  g->reopen();
  EXPECT_TRUE(g->enter().has_value());
}

TEST(Gate, DrainWaitsForEveryPassInFlight) {
  auto g = Gate::make();
  int drained = 0;
  auto a = g->enter();
  auto b = g->enter();
  ASSERT_TRUE(a && b);
  EXPECT_EQ(g->inFlight(), 2u);
  g->close();
  g->onDrained([&] { ++drained; });
  a.reset();
  EXPECT_EQ(drained, 0);
  b.reset();
  EXPECT_EQ(drained, 1);
  EXPECT_EQ(g->inFlight(), 0u);
}

TEST(Gate, DrainWithNothingInFlightRunsAtOnce) {
  auto g = Gate::make();
  int drained = 0;
  g->onDrained([&] { ++drained; });
  EXPECT_EQ(drained, 1);
}

TEST(Gate, AMovedPassLeavesOnlyOnce) {
  auto g = Gate::make();
  auto a = g->enter();
  auto moved = std::move(*a);
  a.reset();
  EXPECT_EQ(g->inFlight(), 1u);
}

}  // namespace
}  // namespace ductus::intake
