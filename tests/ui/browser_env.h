// What the browser tests of tests/ui read from the environment: whether a
// missing browser is a failure (CI) or a skip, and which chromium to drive.
#pragma once

#include <cstdlib>
#include <string>

namespace ductus::test {

// DUCTUS_REQUIRE_UI=1 (CI): a missing console, node, playwright-core or
// chromium fails the test instead of skipping it.
inline bool uiRequired() {
  const char* r = std::getenv("DUCTUS_REQUIRE_UI");
  return r && std::string(r) == "1";
}

// $CHROMIUM, else Debian's.
inline std::string chromiumPath() {
  const char* c = std::getenv("CHROMIUM");
  return c && *c ? c : "/usr/bin/chromium";
}

}  // namespace ductus::test
