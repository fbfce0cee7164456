// What the end-to-end tests of issue #23's untested paths share: the per-key
// order check on a receiver's arrivals, the stored control ids, and a wait
// for a line in the engine's log.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "tests/support/e2e.h"
#include "tests/support/engine_process.h"

namespace ductus::test {

// The first arrival of each control id, per key ("K3-7": key K3, seq 7),
// must come in sequence order; later arrivals are resends (at least once).
inline void expectPerKeyOrder(const std::vector<std::string>& arrivals) {
  std::set<std::string> seen;
  std::map<std::string, int> last;
  for (auto& id : arrivals) {
    if (!seen.insert(id).second) continue;
    auto dash = id.rfind('-');
    ASSERT_NE(dash, std::string::npos) << id;
    std::string key = id.substr(0, dash);
    int seq = std::stoi(id.substr(dash + 1));
    auto it = last.find(key);
    if (it != last.end()) {
      EXPECT_LT(it->second, seq) << "key " << key << ": " << id << " arrived after seq "
                                 << it->second;
    }
    last[key] = seq;
  }
}

// MSH-10 of each stored HL7 message of an interface (the 10th '|' field).
inline const char* const kStoredControlIds =
    "SELECT split_part(convert_from(m.payload, 'LATIN1'), '|', 10) FROM messages m "
    "JOIN interfaces i ON i.id = m.interface_id WHERE i.name = $1";

// How often `text` occurs in the engine's log.
inline size_t logCount(const EngineProcess& engine, const std::string& text) {
  std::string log = engine.log();
  size_t n = 0;
  for (size_t at = log.find(text); at != std::string::npos; at = log.find(text, at + 1)) ++n;
  return n;
}

}  // namespace ductus::test
