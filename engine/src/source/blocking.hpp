// The blocking engines: `buffered` (pread through the page cache) and `direct` (O_DIRECT
// into one aligned window). One window; submit() performs the read and queues its
// completion, so reap() never blocks.
#pragma once

#include <optional>
#include <string>

#include "source/source.hpp"
#include "source/window.hpp"

namespace resid {

class BlockingSource final : public Source {
 public:
  BlockingSource(SourceEngine engine, const std::string& path, size_t window_capacity);
  ~BlockingSource() override;

  SourceEngine engine() const override { return engine_; }
  uint64_t file_size() const override { return file_size_; }
  size_t window_count() const override { return windows_.count(); }
  size_t window_capacity() const override { return windows_.capacity(); }
  size_t window_bytes() const override { return windows_.total_bytes(); }
  uint32_t alignment() const override { return align_; }

  bool submit(const Extent& e, uint64_t tag) override;
  std::optional<Completion> reap(bool wait) override;
  void release(const Completion& c) override;
  void drain() override {}
  int free_window() const override { return ready_ ? -1 : windows_.find_free(); }
  size_t windows_free() const override { return windows_.find_free() >= 0 ? 1 : 0; }
  size_t max_inflight() const override { return 1; }
  bool registered_buffers() const override { return false; }
  // A read completes inside submit(); it counts as in flight until it is reaped.
  size_t inflight() const override { return ready_ ? 1 : 0; }
  void begin_bundle(uint32_t) override {}
  int completion_fd() override { return -1; }
  SourceStats stats() const override { return stats_; }

 private:
  Completion reject(Completion c, RejectReason reason, std::string why);

  SourceEngine engine_;
  std::string path_;
  int fd_ = -1;
  uint64_t file_size_ = 0;
  uint32_t align_ = 1;
  WindowPool windows_;
  std::optional<Completion> ready_;
  SourceStats stats_;
};

}  // namespace resid
