// Bytes this process caused to be read from storage (/proc/self/io read_bytes; counts
// O_DIRECT reads and page-cache readahead alike). nullopt when /proc/self/io is unreadable.
#pragma once

#include <cstdint>
#include <optional>

namespace resid {

std::optional<uint64_t> proc_read_bytes();

}  // namespace resid
