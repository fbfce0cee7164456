// DUCTUS_ASAN: 1 in a build with AddressSanitizer, where shadow memory
// makes an address-space limit or a memory bound meaningless. GCC says so
// with __SANITIZE_ADDRESS__; clang 14 (the Debug build's compiler) only
// through __has_feature.
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define DUCTUS_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DUCTUS_ASAN 1
#endif
#endif
#ifndef DUCTUS_ASAN
#define DUCTUS_ASAN 0
#endif
