// Small filesystem helpers: the contract's "write to a temporary name, then rename" rule,
// directory creation, and text-file reads for /proc and /sys.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace resid {

// Write `data` to dir/name.tmp, fsync, rename to dir/name. Throws RunError on failure.
void write_file_atomic(const std::string& path, std::string_view data);

// mkdir -p; throws RunError with the path and errno.
void make_dirs(const std::string& path);

// Whole file as text, or nullopt if it cannot be read.
std::optional<std::string> read_text_file(const std::string& path);

std::string trim(std::string s);

}  // namespace resid
