// partition_of: the ordering key's lane. FNV-1a 64-bit over the key's bytes,
// modulo the partition count. Stable forever: stored rows carry the result,
// so changing this would reorder every queue. Fixed vectors in
// tests/common/partition-test.cpp guard it.
#pragma once

#include <cstdint>
#include <string_view>

namespace ductus {

uint64_t fnv1a64(std::string_view bytes);

// partitions must be >= 1 (the config refuses 0).
uint32_t partition_of(std::string_view key, uint32_t partitions);

}  // namespace ductus
