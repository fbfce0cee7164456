// The parts of the worker contract that are not frames: the transient
// marker as C++ text. Both are defined once, in worker.capnp.
#pragma once

#include <string>
#include <string_view>

#include "proto/worker.capnp.h"

namespace ductus::proto {

// "[ductus:transient]": in an error's text, the failure is transient (the
// message waits and is retried).
inline std::string_view transientMarker() {
  auto t = wire::TRANSIENT_MARKER.get();
  return {t.cStr(), t.size()};
}

// "[ductus:transient] why": an error text that marks itself transient.
inline std::string transientText(std::string_view why) {
  std::string s(transientMarker());
  s += ' ';
  s += why;
  return s;
}

}  // namespace ductus::proto
