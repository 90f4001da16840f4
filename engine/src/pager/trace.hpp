// The chunk event trace (trace.bin in docs/run-contract.md). Records are appended by the
// pager thread and the driver threads under one short lock into a buffer reserved up front,
// then sorted by (step, kind, chunk) so harmless interleavings within a step do not change
// the bytes while a different decision does.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace resid {

enum class TraceKind : uint8_t {
  Access = 1,
  DemandFill = 2,
  PrefetchFill = 3,
  Eviction = 4,
  Signal = 5,
};

constexpr uint8_t kTraceMiss = 1;  // access flag bit 0

struct TraceRecord {
  uint32_t step;
  uint32_t chunk;
  uint8_t kind;
  uint8_t flags;
  uint16_t reserved;
  uint32_t aux;
};
static_assert(sizeof(TraceRecord) == 16);

class Trace {
 public:
  explicit Trace(size_t reserve_records);
  void append(uint64_t step, uint32_t chunk, TraceKind kind, uint8_t flags = 0);
  // Sorted copy of what was recorded so far.
  std::vector<TraceRecord> sorted() const;
  size_t size() const;
  // The contract's byte image: 32-byte header, then the sorted 16-byte records.
  std::string serialize(uint64_t chunk_size, uint64_t chunk_count) const;

 private:
  mutable std::mutex mu_;
  std::vector<TraceRecord> records_;
};

}  // namespace resid
