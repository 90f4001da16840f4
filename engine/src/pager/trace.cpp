#include "pager/trace.hpp"

#include <algorithm>
#include <cstring>
#include <tuple>

namespace resid {

namespace {

void put_le(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

}  // namespace

Trace::Trace(size_t reserve_records) { records_.reserve(reserve_records); }

void Trace::append(uint64_t step, uint32_t chunk, TraceKind kind, uint8_t flags) {
  const TraceRecord r{static_cast<uint32_t>(step), chunk, static_cast<uint8_t>(kind), flags, 0, 0};
  std::lock_guard lk(mu_);
  records_.push_back(r);  // within the reservation in every bounded run; grows otherwise
}

size_t Trace::size() const {
  std::lock_guard lk(mu_);
  return records_.size();
}

std::vector<TraceRecord> Trace::sorted() const {
  std::vector<TraceRecord> v;
  {
    std::lock_guard lk(mu_);
    v = records_;
  }
  std::sort(v.begin(), v.end(), [](const TraceRecord& a, const TraceRecord& b) {
    return std::tie(a.step, a.kind, a.chunk, a.flags, a.aux) <
           std::tie(b.step, b.kind, b.chunk, b.flags, b.aux);
  });
  return v;
}

std::string Trace::serialize(uint64_t chunk_size, uint64_t chunk_count) const {
  const auto recs = sorted();
  std::string out;
  out.reserve(32 + recs.size() * 16);
  out.append("RSTRACE1", 8);
  put_le(out, 1, 4);
  put_le(out, sizeof(TraceRecord), 4);
  put_le(out, chunk_size, 8);
  put_le(out, chunk_count, 8);
  for (const auto& r : recs) {
    put_le(out, r.step, 4);
    put_le(out, r.chunk, 4);
    put_le(out, r.kind, 1);
    put_le(out, r.flags, 1);
    put_le(out, r.reserved, 2);
    put_le(out, r.aux, 4);
  }
  return out;
}

}  // namespace resid
