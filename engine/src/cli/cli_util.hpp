// Option validation shared by the subcommands' parsers (main.cpp, stream_cli.cpp).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>

#include "source/source.hpp"

namespace resid {

// Unsigned integers only, within the option's type: digits, no sign, no fraction, no
// overflow (a byte count of "-1", "1e9" or 2^64 must be rejected, not wrapped or clamped).
CLI::Validator unsigned_up_to(uint64_t max);

template <class T>
CLI::Option* add_uint(CLI::App* app, const std::string& name, T& var, const std::string& help) {
  return app->add_option(name, var, help)->check(unsigned_up_to(std::numeric_limits<T>::max()));
}

// --source, --windows and --depth of a subcommand that reads through a Source (scan,
// generate, stream): the flags as given; windows and depth stay unset unless given.
struct SourceFlags {
  std::string source;
  uint32_t windows = 0, depth = 0;
  CLI::Option *windows_opt = nullptr, *depth_opt = nullptr;

  // Into a config's fields (the engine name was checked by the parser).
  void apply(SourceEngine& engine, std::optional<uint32_t>& w, std::optional<uint32_t>& d) const;
};
void add_source_flags(CLI::App* app, SourceFlags& f, const std::string& default_source);

// --fault CELL[@N] (source/fault.hpp), parsed by parse_fault_spec after the command line;
// `units` says what N counts for the subcommand's own cells.
void add_fault_flag(CLI::App* app, std::string& spec, const std::string& units);

}  // namespace resid
