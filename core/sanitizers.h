// Whether this translation unit is compiled with AddressSanitizer: GCC says so with
// __SANITIZE_ADDRESS__, clang (before 18) only through __has_feature. Code that must behave
// differently under ASan (the caching allocator stays off, the kernel emulator allocates exact
// sizes, tests of the cache skip) asks EMBER_ASAN, one way for both compilers.
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define EMBER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define EMBER_ASAN 1
#endif
#endif
#ifndef EMBER_ASAN
#define EMBER_ASAN 0
#endif
