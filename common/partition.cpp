#include "common/partition.h"

namespace ductus {

uint64_t fnv1a64(std::string_view bytes) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV offset basis
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ull;  // FNV prime
  }
  return h;
}

uint32_t partition_of(std::string_view key, uint32_t partitions) {
  if (partitions <= 1) return 0;
  return static_cast<uint32_t>(fnv1a64(key) % partitions);
}

}  // namespace ductus
