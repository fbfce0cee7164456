#include "common/partition.h"

#include <gtest/gtest.h>

namespace ductus {
namespace {

// These vectors are stored in every deliveries row as partition_key. If one
// of them changes, every running queue would be reordered: never edit them.
TEST(PartitionOf, Fnv1a64MatchesThePublishedVectors) {
  EXPECT_EQ(fnv1a64(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(fnv1a64("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(fnv1a64("foobar"), 0x85944171f73967e8ull);
}

TEST(PartitionOf, KeysMapToFixedLanesForever) {
  EXPECT_EQ(partition_of("MRN12345", 16), 11u);
  EXPECT_EQ(partition_of("12345", 16), 8u);
  EXPECT_EQ(partition_of("12345", 64), 56u);
  EXPECT_EQ(partition_of("12345", 7), 1u);
  EXPECT_EQ(partition_of("M\xc3\xbcller", 16), 12u);  // UTF-8 bytes of Müller
  EXPECT_EQ(partition_of("", 64), 37u);
}

TEST(PartitionOf, OnePartitionIsAlwaysLaneZero) {
  EXPECT_EQ(partition_of("anything", 1), 0u);
  EXPECT_EQ(partition_of("anything", 0), 0u);
}

}  // namespace
}  // namespace ductus
