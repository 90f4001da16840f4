#include "signal_audit.hpp"

namespace resid {

void SignalAudit::record(uint64_t cursor) {
  const uint64_t expected = last_ ? *last_ + 1 : 0;
  if (cursor != expected) ++out_of_order_;
  last_ = cursor;
  ++signals_;
  if (!per_chunk_.empty()) ++per_chunk_[cursor % per_chunk_.size()];
}

std::vector<uint32_t> SignalAudit::zero_signal_chunks() const {
  std::vector<uint32_t> out;
  for (uint32_t c = 0; c < per_chunk_.size(); ++c)
    if (per_chunk_[c] == 0) out.push_back(c);
  return out;
}

}  // namespace resid
