#include "cli/cli_util.hpp"

#include <cerrno>
#include <cstdlib>

#include "source/fault.hpp"

namespace resid {

CLI::Validator unsigned_up_to(uint64_t max) {
  return CLI::Validator(
      [max](std::string& v) -> std::string {
        if (v.empty() || v.size() > 20 || v.find_first_not_of("0123456789") != std::string::npos)
          return "'" + v + "' is not a non-negative integer";
        errno = 0;
        const unsigned long long x = std::strtoull(v.c_str(), nullptr, 10);
        if (errno == ERANGE || x > max) return "'" + v + "' is larger than " + std::to_string(max);
        return {};
      },
      "UINT");
}

void add_source_flags(CLI::App* app, SourceFlags& f, const std::string& default_source) {
  f.source = default_source;
  app->add_option("--source", f.source, "buffered | direct | uring (P, D, F)")
      ->check(CLI::IsMember({"buffered", "direct", "uring"}))
      ->capture_default_str();
  f.windows_opt = add_uint(app, "--windows", f.windows, "source windows (default 8 for uring, 1 otherwise)");
  f.depth_opt = add_uint(app, "--depth", f.depth, "most reads in flight (default: --windows)");
}

void SourceFlags::apply(SourceEngine& engine, std::optional<uint32_t>& w, std::optional<uint32_t>& d) const {
  engine = *parse_source_engine(source);
  if (windows_opt->count() > 0) w = windows;
  if (depth_opt->count() > 0) d = depth;
}

void add_fault_flag(CLI::App* app, std::string& spec, const std::string& units) {
  app->add_option("--fault", spec,
                  "a deterministic fault cell, CELL or CELL@N (N: a read index unless said; " + units + "): " +
                      fault_cell_names());
}

}  // namespace resid
