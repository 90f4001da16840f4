#include "source/window.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>
#include <stdexcept>

#include "core/errors.hpp"

namespace resid {

const char* to_string(WindowPhase p) {
  switch (p) {
    case WindowPhase::Free: return "FREE";
    case WindowPhase::Reading: return "READING";
    case WindowPhase::HostReady: return "HOST_READY";
    case WindowPhase::Copying: return "COPYING";
  }
  return "?";
}

std::byte* alloc_aligned_buffer(size_t bytes) {
  // Over-map by one alignment unit and trim, so the start is 2 MiB aligned without
  // depending on where the kernel happens to place the mapping.
  const size_t span = bytes + kHugeAlign;
  void* raw = ::mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED)
    throw RunError("cannot allocate a " + std::to_string(bytes) + "-byte window: " +
                   errno_name(errno));
  const auto base = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (base + kHugeAlign - 1) & ~(uintptr_t)(kHugeAlign - 1);
  if (aligned > base) ::munmap(raw, aligned - base);
  const uintptr_t end = base + span;
  if (end > aligned + bytes) ::munmap(reinterpret_cast<void*>(aligned + bytes), end - aligned - bytes);
  auto* p = reinterpret_cast<std::byte*>(aligned);
  ::madvise(p, bytes, MADV_HUGEPAGE);  // advisory: THP may be off; reads still work
  std::memset(p, 0, bytes);            // prefault: charge the memory now
  return p;
}

void free_aligned_buffer(std::byte* p, size_t bytes) {
  if (p) ::munmap(p, bytes);
}

WindowPool::WindowPool(size_t count, size_t capacity) {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  capacity_ = (capacity + page - 1) / page * page;
  if (count == 0 || capacity_ == 0) throw std::invalid_argument("empty window pool");
  bufs_.reserve(count);
  try {
    for (size_t i = 0; i < count; ++i) bufs_.push_back(alloc_aligned_buffer(capacity_));
  } catch (...) {
    for (auto* b : bufs_) free_aligned_buffer(b, capacity_);
    throw;
  }
  states_.assign(count, WindowPhase::Free);
}

WindowPool::~WindowPool() {
  for (auto* b : bufs_) free_aligned_buffer(b, capacity_);
}

int WindowPool::find_free() const {
  for (size_t i = 0; i < states_.size(); ++i)
    if (states_[i] == WindowPhase::Free) return static_cast<int>(i);
  return -1;
}

void WindowPool::transition(size_t w, WindowPhase from, WindowPhase to) {
  if (w >= states_.size()) throw std::logic_error("window index out of range");
  if (states_[w] != from)
    throw std::logic_error("window " + std::to_string(w) + ": invalid transition " +
                           to_string(states_[w]) + " -> " + to_string(to) + " (expected " +
                           to_string(from) + ")");
  states_[w] = to;
}

}  // namespace resid
