// Counting dynamic allocations on the read path. A thread marks the stretch of code that
// must not allocate (the stream's producer and consumer loops, after start) with a
// ReadPathScope; the global operator new replacement in alloc_hook.cpp (linked into the
// residctl binary and the tests that assert on it, never into the library) counts every
// allocation made while the calling thread is inside such a scope. A rejection builds a
// message; that code runs in a RejectionPathScope and is counted separately, so the
// read-path count is the one that must be zero.
#pragma once

#include <cstdint>

namespace resid {

enum class AllocPath : uint8_t { None = 0, Read = 1, Rejection = 2 };

struct AllocCounts {
  uint64_t read_path = 0;       // allocations inside a ReadPathScope
  uint64_t rejection_path = 0;  // allocations inside a RejectionPathScope
};

// True when the operator new replacement is linked into this binary (so a count of 0
// means "none happened", not "nobody counted").
bool alloc_hook_installed();
AllocCounts alloc_counts();

class ReadPathScope {
 public:
  ReadPathScope();
  ~ReadPathScope();
  ReadPathScope(const ReadPathScope&) = delete;
  ReadPathScope& operator=(const ReadPathScope&) = delete;

 private:
  AllocPath prev_;
};

// Inside a read path: allocations for a rejection's message are counted apart.
class RejectionPathScope {
 public:
  RejectionPathScope();
  ~RejectionPathScope();
  RejectionPathScope(const RejectionPathScope&) = delete;
  RejectionPathScope& operator=(const RejectionPathScope&) = delete;

 private:
  AllocPath prev_;
};

namespace alloc_detail {
// Called by the hook for every allocation; cheap when the thread is on no path.
void note_allocation() noexcept;
void mark_hook_installed() noexcept;
}  // namespace alloc_detail

}  // namespace resid
