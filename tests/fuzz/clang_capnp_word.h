// Force-included (-include) into proto/'s sources and the targets that read
// frames, in the fuzz build only (tests/fuzz/CMakeLists.txt).
//
// Cap'n Proto 0.9 (Debian 12) makes capnp::word copyable under GCC but not
// under clang (capnp/common.h: `#if __GNUC__ < 8 || __clang__
// KJ_DISALLOW_COPY(word)`), and proto/frame.cpp keeps its buffer in a
// std::vector<capnp::word>, whose resize() needs words to be movable: clang
// refuses to compile it. Here capnp/common.h is read first with
// KJ_DISALLOW_COPY a no-op, so word is copyable as under GCC (which built
// libcapnp itself); the kj headers it includes are read before, with the real
// macro, and the macro is restored after.
#pragma once

#include <inttypes.h>
#include <kj/memory.h>
#include <kj/string.h>
#include <kj/units.h>
#include <kj/windows-sanity.h>

#pragma push_macro("KJ_DISALLOW_COPY")
#undef KJ_DISALLOW_COPY
#define KJ_DISALLOW_COPY(classname) static_assert(true, "copyable, as under GCC")
#include <capnp/common.h>
#pragma pop_macro("KJ_DISALLOW_COPY")
