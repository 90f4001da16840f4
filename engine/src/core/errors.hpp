// Error kinds map onto the run contract's exit statuses: InputError -> 2 (bad input,
// nothing written), RunError -> 1 (the run started and failed; run.json says why).
#pragma once

#include <stdexcept>
#include <string>

namespace resid {

struct InputError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct RunError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// "EPERM"-style name for an errno value (strerror text is locale-dependent and long).
std::string errno_name(int err);

}  // namespace resid
