// The `uring` source engine (arm F): io_uring through liburing, O_DIRECT, N windows
// (allocated once, 2 MiB aligned, huge-page advised, prefaulted; optionally registered with
// io_uring_register_buffers and read with read_fixed), at most `depth` reads in flight.
// Each window has one preallocated op record; a read's SQE user_data points at it, and it
// carries the caller's tag (the Plan's ticket), the extent and the window back to reap().
// Nothing on the submit/reap/release path allocates (a rejection's message does, inside a
// RejectionPathScope).
//
// Rejections are never published: an extent that is empty, outside the file or wider than a
// window completes rejected without reaching the kernel; a negative completion is a failed
// read; fewer bytes than the extent's end is a short read.
#pragma once

#include <liburing.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "source/source.hpp"
#include "source/window.hpp"

namespace resid {

class UringSource final : public Source {
 public:
  UringSource(const std::string& path, size_t window_capacity, const SourceOptions& opts);
  ~UringSource() override;
  UringSource(const UringSource&) = delete;
  UringSource& operator=(const UringSource&) = delete;

  SourceEngine engine() const override { return SourceEngine::Uring; }
  uint64_t file_size() const override { return file_size_; }
  size_t window_count() const override { return windows_.count(); }
  size_t window_capacity() const override { return windows_.capacity(); }
  size_t window_bytes() const override { return windows_.total_bytes(); }
  uint32_t alignment() const override { return align_; }

  bool submit(const Extent& e, uint64_t tag) override;
  std::optional<Completion> reap(bool wait) override;
  void release(const Completion& c) override;
  void drain() override;
  int free_window() const override;
  size_t windows_free() const override;
  size_t max_inflight() const override { return depth_; }
  bool registered_buffers() const override { return registered_; }
  size_t inflight() const override { return inflight_; }
  void begin_bundle(uint32_t) override {}
  // An eventfd registered with the ring (io_uring_register_eventfd): readable once a
  // completion is posted. Made on the first call.
  int completion_fd() override;
  SourceStats stats() const override { return stats_; }

 private:
  struct Op {
    uint64_t tag = 0;
    Extent extent;
    int window = -1;
    uint64_t start = 0;  // aligned file offset
    uint64_t head = 0;   // logical bytes start this far into the window
    uint64_t span = 0;
    uint64_t seq = 0;
    uint64_t submit_ns = 0;
    RejectReason pre_reject = RejectReason::None;  // rejected before reaching the kernel
  };

  Completion finish(Op& op, int res);
  Completion rejected(Op& op, RejectReason reason, int res);

  std::string path_;
  int fd_ = -1;
  uint64_t file_size_ = 0;
  uint32_t align_ = 4096;
  size_t depth_ = 0;
  bool registered_ = false;
  bool ring_ready_ = false;
  int event_fd_ = -1;
  WindowPool windows_;
  std::vector<Op> ops_;           // one per window
  std::vector<int> pre_rejects_;  // ring of windows whose read was rejected at submit
  size_t pre_head_ = 0, pre_count_ = 0;
  size_t inflight_ = 0;
  uint64_t submissions_ = 0;
  io_uring ring_{};
  SourceStats stats_;
};

}  // namespace resid
