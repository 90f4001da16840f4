#include "source/blocking.hpp"

#include <unistd.h>

#include <cerrno>
#include <stdexcept>

#include "core/alloc_count.hpp"
#include "core/clock.hpp"
#include "core/errors.hpp"

namespace resid {

BlockingSource::BlockingSource(SourceEngine engine, const std::string& path,
                               size_t window_capacity)
    : engine_(engine), path_(path), windows_(1, window_capacity) {
  const SourceFile f = open_source_file(path, engine == SourceEngine::Direct);
  fd_ = f.fd;
  file_size_ = f.size;
  align_ = f.alignment;
}

BlockingSource::~BlockingSource() {
  if (fd_ >= 0) ::close(fd_);
}

Completion BlockingSource::reject(Completion c, RejectReason reason, std::string why) {
  ++stats_.rejections;
  c.reason = reason;
  c.error = std::move(why);
  c.data = nullptr;
  return c;
}

bool BlockingSource::submit(const Extent& e, uint64_t tag) {
  const int w = windows_.find_free();
  if (w < 0 || ready_) return false;
  windows_.transition(static_cast<size_t>(w), WindowPhase::Free, WindowPhase::Reading);
  Completion c;
  c.tag = tag;
  c.extent = e;
  c.window = w;
  ++stats_.reads;
  stats_.peak_inflight = 1;
  stats_.logical_bytes += e.length;

  // Built only for a rejection's message: the accepted read path does not allocate.
  auto what = [&] {
    return path_ + " [" + std::to_string(e.offset) + ", +" + std::to_string(e.length) + ")";
  };
  if (e.length == 0 || e.offset > file_size_ || e.length > file_size_ - e.offset) {
    RejectionPathScope scope;  // the message is the rejection's, not the read path's
    windows_.transition(w, WindowPhase::Reading, WindowPhase::HostReady);
    ready_ = reject(std::move(c), RejectReason::OutsideFile, "extent " + what() + " is outside the file (" +
                                      std::to_string(file_size_) + " bytes)");
    return true;
  }
  // O_DIRECT: round the request out to the alignment; the logical bytes sit `head` bytes in.
  const uint64_t a = align_;
  const uint64_t start = e.offset / a * a;
  const uint64_t end = (e.offset + e.length + a - 1) / a * a;
  const uint64_t head = e.offset - start;
  const uint64_t span = end - start;
  if (span > windows_.capacity()) {
    RejectionPathScope scope;
    windows_.transition(w, WindowPhase::Reading, WindowPhase::HostReady);
    ready_ = reject(std::move(c), RejectReason::TooLarge, "extent " + what() + " needs " + std::to_string(span) +
                                      " aligned bytes, the window holds " +
                                      std::to_string(windows_.capacity()));
    return true;
  }
  stats_.physical_bytes += span;
  stats_.padding_bytes += span - e.length;

  std::byte* buf = windows_.data(w);
  const uint64_t t0 = now_ns();
  ssize_t n;
  do {
    n = ::pread(fd_, buf, span, static_cast<off_t>(start));
  } while (n < 0 && errno == EINTR);
  const int err = errno;
  stats_.read_ns += now_ns() - t0;
  windows_.transition(w, WindowPhase::Reading, WindowPhase::HostReady);

  if (n < 0) {
    RejectionPathScope scope;
    ready_ = reject(std::move(c), RejectReason::Failed, "read of " + what() + " failed (" + errno_name(err) + ")");
  } else if (static_cast<uint64_t>(n) < head + e.length) {
    RejectionPathScope scope;
    // A short completion never publishes: the missing tail would read as garbage.
    const uint64_t got = static_cast<uint64_t>(n) > head ? static_cast<uint64_t>(n) - head : 0;
    ready_ = reject(std::move(c), RejectReason::ShortRead, "short read of " + what() + ": got " + std::to_string(got) +
                                      " of " + std::to_string(e.length) + " bytes");
  } else {
    c.data = buf + head;
    ready_ = std::move(c);
  }
  return true;
}

std::optional<Completion> BlockingSource::reap(bool /*wait*/) {
  std::optional<Completion> out;
  out.swap(ready_);
  if (out) ++stats_.completions;
  return out;
}

void BlockingSource::release(const Completion& c) {
  if (c.window < 0) throw std::logic_error("release of a completion without a window");
  windows_.transition(static_cast<size_t>(c.window), WindowPhase::HostReady, WindowPhase::Free);
}

}  // namespace resid
