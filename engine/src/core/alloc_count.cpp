#include "core/alloc_count.hpp"

#include <atomic>

namespace resid {

namespace {

// Constant-initialised, so the hook may run before any dynamic initialiser.
thread_local AllocPath t_path = AllocPath::None;
std::atomic<uint64_t> g_read{0};
std::atomic<uint64_t> g_rejection{0};
std::atomic<bool> g_installed{false};

}  // namespace

namespace alloc_detail {

void note_allocation() noexcept {
  switch (t_path) {
    case AllocPath::None: return;
    case AllocPath::Read: g_read.fetch_add(1, std::memory_order_relaxed); return;
    case AllocPath::Rejection: g_rejection.fetch_add(1, std::memory_order_relaxed); return;
  }
}

void mark_hook_installed() noexcept { g_installed.store(true, std::memory_order_relaxed); }

}  // namespace alloc_detail

bool alloc_hook_installed() { return g_installed.load(std::memory_order_relaxed); }

AllocCounts alloc_counts() {
  return {g_read.load(std::memory_order_relaxed), g_rejection.load(std::memory_order_relaxed)};
}

ReadPathScope::ReadPathScope() : prev_(t_path) { t_path = AllocPath::Read; }
ReadPathScope::~ReadPathScope() { t_path = prev_; }

RejectionPathScope::RejectionPathScope() : prev_(t_path) {
  if (t_path == AllocPath::Read) t_path = AllocPath::Rejection;
}
RejectionPathScope::~RejectionPathScope() { t_path = prev_; }

}  // namespace resid
