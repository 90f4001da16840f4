// A window: a fixed host buffer a source read lands in. Allocated once, 2 MiB aligned and
// huge-page advised (O_DIRECT into huge pages reads about 2x faster than into 4 KiB pages),
// prefaulted so its memory is charged at construction, never per read.
// State machine: FREE -> READING -> HOST_READY -> FREE; any other transition is an error.
// The Plan's windows (plan/state.hpp) add COPYING between HOST_READY and FREE: one phase
// vocabulary for both.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace resid {

constexpr size_t kHugeAlign = 2u << 20;

enum class WindowPhase : uint8_t { Free, Reading, HostReady, Copying };
const char* to_string(WindowPhase p);

class WindowPool {
 public:
  // `count` windows of `capacity` bytes each (rounded up to the page size).
  WindowPool(size_t count, size_t capacity);
  ~WindowPool();
  WindowPool(const WindowPool&) = delete;
  WindowPool& operator=(const WindowPool&) = delete;

  size_t count() const { return states_.size(); }
  size_t capacity() const { return capacity_; }
  // Bytes the windows occupy: what the pager pays from its budget.
  size_t total_bytes() const { return capacity_ * states_.size(); }
  std::byte* data(size_t w) const { return bufs_[w]; }
  WindowPhase state(size_t w) const { return states_[w]; }

  // Index of a FREE window, or -1.
  int find_free() const;
  // Checked transition; throws std::logic_error naming the window and both states.
  void transition(size_t w, WindowPhase from, WindowPhase to);

 private:
  size_t capacity_;
  std::vector<std::byte*> bufs_;
  std::vector<WindowPhase> states_;
};

// One 2 MiB-aligned, huge-page-advised, prefaulted anonymous buffer (munmap to free).
std::byte* alloc_aligned_buffer(size_t bytes);
void free_aligned_buffer(std::byte* p, size_t bytes);

}  // namespace resid
