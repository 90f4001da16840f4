// Option validation shared by the subcommands' parsers (main.cpp, stream_cli.cpp).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <limits>
#include <string>

namespace resid {

// Unsigned integers only, within the option's type: digits, no sign, no fraction, no
// overflow (a byte count of "-1", "1e9" or 2^64 must be rejected, not wrapped or clamped).
CLI::Validator unsigned_up_to(uint64_t max);

template <class T>
CLI::Option* add_uint(CLI::App* app, const std::string& name, T& var, const std::string& help) {
  return app->add_option(name, var, help)->check(unsigned_up_to(std::numeric_limits<T>::max()));
}

}  // namespace resid
