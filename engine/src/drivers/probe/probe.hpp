// `residctl probe`: the kernel features this pipeline depends on, as one JSON object.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace resid {

nlohmann::json run_probe(const std::string& dir);

}  // namespace resid
