// What every fuzz target holds a parser to: its clean error is an InputError (exit 2, bad
// input; main.cpp prints its message as one line); anything else escaping (another exception
// type: the CLI would report bad input as a failed run, exit 1), a crash, a sanitizer report,
// a leak, a hang or a blown memory limit is a finding.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string_view>

#include "core/errors.hpp"

namespace resid::fuzz {

[[noreturn]] inline void finding(const char* what, const char* detail) {
  std::fprintf(stderr, "FINDING: %s: %s\n", what, detail);
  std::abort();  // libFuzzer saves the input as a crash
}

// Runs `parse`; a clean error is fine, anything else is a finding.
template <class F>
void expect_clean(F&& parse) {
  try {
    parse();
  } catch (const InputError&) {
  } catch (const std::exception& e) {
    finding("an exception other than InputError escaped", e.what());
  } catch (...) {
    finding("a non-std exception escaped", "?");
  }
}

}  // namespace resid::fuzz
