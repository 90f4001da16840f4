#include "cli_util.hpp"

#include <cerrno>
#include <cstdlib>

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

}  // namespace resid
