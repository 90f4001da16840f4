#include "pager/signal_audit.hpp"

#include <stdexcept>

namespace resid {

SignalAudit::SignalAudit(uint32_t chunks, std::vector<std::vector<uint32_t>> steps)
    : per_chunk_(chunks, 0), declared_(chunks, 0), steps_(std::move(steps)) {
  for (const auto& s : steps_)
    for (uint32_t c : s) {
      if (c >= chunks) throw std::out_of_range("signal audit: step chunk out of range");
      declared_[c] = 1;
    }
}

void SignalAudit::record(uint64_t cursor) {
  const uint64_t expected = last_ ? *last_ + 1 : 0;
  if (cursor != expected) ++out_of_order_;
  last_ = cursor;
  ++signals_;
  if (!steps_.empty()) {
    for (uint32_t c : steps_[cursor % steps_.size()]) ++per_chunk_[c];
  } else if (!per_chunk_.empty()) {
    ++per_chunk_[cursor % per_chunk_.size()];
  }
}

std::vector<uint32_t> SignalAudit::zero_signal_chunks() const {
  std::vector<uint32_t> out;
  for (uint32_t c = 0; c < per_chunk_.size(); ++c)
    if (declared_[c] && per_chunk_[c] == 0) out.push_back(c);
  return out;
}

}  // namespace resid
