// FUZZ_CHECK: the fuzzers' assertion. A violated invariant prints what broke and traps, which
// libFuzzer reports as a crash and saves the input. It is a macro (not a function) only so that
// the message carries the file and line of the check; clang 14 has no std::source_location.
#pragma once

#include <cstdio>

#define FUZZ_CHECK(cond, ...)                                                                \
  do {                                                                                       \
    if (!(cond)) {                                                                           \
      std::fprintf(stderr, "\nFUZZ INVARIANT VIOLATED at %s:%d: %s\n  ", __FILE__, __LINE__, \
                   #cond);                                                                   \
      std::fprintf(stderr, __VA_ARGS__);                                                     \
      std::fputc('\n', stderr);                                                              \
      __builtin_trap();                                                                      \
    }                                                                                        \
  } while (0)
