#include "source/uring.hpp"

#include <sys/eventfd.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <stdexcept>

#include "core/alloc_count.hpp"
#include "core/clock.hpp"
#include "core/errors.hpp"

namespace resid {

namespace {

unsigned pow2_at_least(size_t n) {
  unsigned v = 1;
  while (v < n) v <<= 1;
  return v;
}

}  // namespace

UringSource::UringSource(const std::string& path, size_t window_capacity, const SourceOptions& opts)
    : path_(path),
      windows_(opts.windows == 0 ? throw InputError("the uring source needs at least one window") : opts.windows,
               window_capacity) {
  depth_ = opts.depth == 0 ? opts.windows : opts.depth;
  if (depth_ > opts.windows)
    throw InputError("uring depth " + std::to_string(depth_) + " exceeds the window count " +
                     std::to_string(opts.windows) + " (a read in flight holds a window)");
  const SourceFile f = open_source_file(path, true);
  fd_ = f.fd;
  file_size_ = f.size;
  align_ = f.alignment;
  if (windows_.capacity() % align_ != 0) {
    ::close(fd_);
    throw InputError("window capacity " + std::to_string(windows_.capacity()) +
                     " is not a multiple of the direct-I/O alignment " + std::to_string(align_));
  }
  const unsigned entries = pow2_at_least(depth_);
  const int r = io_uring_queue_init(entries, &ring_, 0);
  if (r < 0) {
    ::close(fd_);
    throw InputError("io_uring_queue_init(" + std::to_string(entries) + ") failed (" + errno_name(-r) +
                     "): io_uring is unavailable here; use --source direct");
  }
  ring_ready_ = true;
  // Reads the file system cannot issue inline are punted to io-wq workers; the kernel's
  // default bound is min(ring entries, 4 x CPUs). At most depth_ reads are ever in flight,
  // so bound the workers to depth_: no more threads than reads, and no concurrency lost.
  // Best effort (Linux >= 5.15): without it the kernel's bound stands.
  unsigned iowq[2] = {static_cast<unsigned>(depth_), 0};  // {bounded, unbounded}; 0 leaves the unbounded pool as is
  (void)io_uring_register_iowq_max_workers(&ring_, iowq);
  if (opts.register_buffers) {
    std::vector<iovec> iov(windows_.count());
    for (size_t w = 0; w < iov.size(); ++w) iov[w] = {windows_.data(w), windows_.capacity()};
    const int rr = io_uring_register_buffers(&ring_, iov.data(), static_cast<unsigned>(iov.size()));
    if (rr < 0) {
      io_uring_queue_exit(&ring_);
      ::close(fd_);
      throw InputError("io_uring_register_buffers failed (" + errno_name(-rr) +
                       "); run without registered buffers");
    }
    registered_ = true;
  }
  ops_.resize(windows_.count());
  for (size_t w = 0; w < ops_.size(); ++w) ops_[w].window = static_cast<int>(w);
  pre_rejects_.assign(windows_.count(), -1);
}

UringSource::~UringSource() {
  // The kernel may still be writing into windows: wait for every read before unmapping.
  while (inflight_ > 0 && ring_ready_) {
    io_uring_cqe* cqe = nullptr;
    const int r = io_uring_wait_cqe(&ring_, &cqe);
    if (r == -EINTR) continue;
    if (r < 0) break;
    io_uring_cqe_seen(&ring_, cqe);
    --inflight_;
  }
  if (ring_ready_) io_uring_queue_exit(&ring_);
  if (event_fd_ >= 0) ::close(event_fd_);
  if (fd_ >= 0) ::close(fd_);
}

int UringSource::completion_fd() {
  if (event_fd_ >= 0) return event_fd_;
  const int fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (fd < 0) throw RunError("eventfd for io_uring completions failed (" + errno_name(errno) + ")");
  const int r = io_uring_register_eventfd(&ring_, fd);
  if (r < 0) {
    ::close(fd);
    throw RunError("io_uring_register_eventfd failed (" + errno_name(-r) + ")");
  }
  event_fd_ = fd;
  return event_fd_;
}

int UringSource::free_window() const {
  if (inflight_ >= depth_) return -1;
  return windows_.find_free();
}

size_t UringSource::windows_free() const {
  size_t n = 0;
  for (size_t w = 0; w < windows_.count(); ++w) n += windows_.state(w) == WindowPhase::Free;
  return n;
}

bool UringSource::submit(const Extent& e, uint64_t tag) {
  if (inflight_ >= depth_) return false;
  const int w = windows_.find_free();
  if (w < 0) return false;
  windows_.transition(static_cast<size_t>(w), WindowPhase::Free, WindowPhase::Reading);
  Op& op = ops_[static_cast<size_t>(w)];
  op.tag = tag;
  op.extent = e;
  op.seq = submissions_++;
  op.pre_reject = RejectReason::None;
  ++stats_.reads;
  stats_.logical_bytes += e.length;

  auto reject_now = [&](RejectReason r) {
    op.pre_reject = r;
    pre_rejects_[(pre_head_ + pre_count_) % pre_rejects_.size()] = w;
    ++pre_count_;
    return true;
  };
  if (e.length == 0 || e.offset > file_size_ || e.length > file_size_ - e.offset)
    return reject_now(RejectReason::OutsideFile);
  const uint64_t a = align_;
  op.start = e.offset / a * a;
  const uint64_t end = (e.offset + e.length + a - 1) / a * a;
  op.head = e.offset - op.start;
  op.span = end - op.start;
  if (op.span > windows_.capacity()) return reject_now(RejectReason::TooLarge);
  stats_.physical_bytes += op.span;
  stats_.padding_bytes += op.span - e.length;

  const uint64_t nbytes = op.span;
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
  if (!sqe) throw std::logic_error("uring: no SQE although in-flight reads are below the ring size");
  std::byte* buf = windows_.data(static_cast<size_t>(w));
  if (registered_)
    io_uring_prep_read_fixed(sqe, fd_, buf, static_cast<unsigned>(nbytes), op.start, w);
  else
    io_uring_prep_read(sqe, fd_, buf, static_cast<unsigned>(nbytes), op.start);
  io_uring_sqe_set_data(sqe, &op);
  op.submit_ns = now_ns();
  for (;;) {
    const int r = io_uring_submit(&ring_);
    if (r >= 0) break;
    if (r == -EINTR || r == -EAGAIN || r == -EBUSY) continue;
    RejectionPathScope scope;
    throw RunError("io_uring_submit failed (" + errno_name(-r) + ")");
  }
  ++inflight_;
  if (inflight_ > stats_.peak_inflight) stats_.peak_inflight = inflight_;
  return true;
}

Completion UringSource::rejected(Op& op, RejectReason reason, int res) {
  RejectionPathScope scope;
  ++stats_.rejections;
  Completion c;
  c.tag = op.tag;
  c.extent = op.extent;
  c.window = op.window;
  c.reason = reason;
  const std::string what = path_ + " [" + std::to_string(op.extent.offset) + ", +" +
                           std::to_string(op.extent.length) + ")";
  switch (reason) {
    case RejectReason::OutsideFile:
      c.error = "extent " + what + " is outside the file (" + std::to_string(file_size_) + " bytes)";
      break;
    case RejectReason::TooLarge:
      c.error = "extent " + what + " needs " + std::to_string(op.span) + " aligned bytes, the window holds " +
                std::to_string(windows_.capacity());
      break;
    case RejectReason::Failed:
      c.error = "read of " + what + " failed (" + errno_name(-res) + ")";
      break;
    case RejectReason::ShortRead: {
      const uint64_t n = res > 0 ? static_cast<uint64_t>(res) : 0;
      const uint64_t got = n > op.head ? n - op.head : 0;
      c.error = "short read of " + what + ": got " + std::to_string(got < op.extent.length ? got : 0) + " of " +
                std::to_string(op.extent.length) + " bytes";
      break;
    }
    case RejectReason::None:
    case RejectReason::ContentMismatch: break;  // the fill path's, never the engine's
  }
  return c;
}

Completion UringSource::finish(Op& op, int res) {
  if (res < 0) return rejected(op, RejectReason::Failed, res);
  if (static_cast<uint64_t>(res) < op.head + op.extent.length) return rejected(op, RejectReason::ShortRead, res);
  Completion c;
  c.tag = op.tag;
  c.extent = op.extent;
  c.window = op.window;
  c.data = windows_.data(static_cast<size_t>(op.window)) + op.head;
  return c;
}

std::optional<Completion> UringSource::reap(bool wait) {
  if (pre_count_ > 0) {
    const int w = pre_rejects_[pre_head_];
    pre_head_ = (pre_head_ + 1) % pre_rejects_.size();
    --pre_count_;
    Op& op = ops_[static_cast<size_t>(w)];
    windows_.transition(static_cast<size_t>(w), WindowPhase::Reading, WindowPhase::HostReady);
    ++stats_.completions;
    return rejected(op, op.pre_reject, 0);
  }
  if (inflight_ == 0) return std::nullopt;
  io_uring_cqe* cqe = nullptr;
  for (;;) {
    const int r = wait ? io_uring_wait_cqe(&ring_, &cqe) : io_uring_peek_cqe(&ring_, &cqe);
    if (r == 0) break;
    if (r == -EINTR) continue;
    if (r == -EAGAIN && !wait) return std::nullopt;
    RejectionPathScope scope;
    throw RunError("io_uring wait failed (" + errno_name(-r) + ")");
  }
  Op& op = *static_cast<Op*>(io_uring_cqe_get_data(cqe));
  const int res = cqe->res;
  io_uring_cqe_seen(&ring_, cqe);
  --inflight_;
  ++stats_.completions;
  stats_.read_ns += now_ns() - op.submit_ns;
  windows_.transition(static_cast<size_t>(op.window), WindowPhase::Reading, WindowPhase::HostReady);
  return finish(op, res);
}

void UringSource::release(const Completion& c) {
  if (c.window < 0 || static_cast<size_t>(c.window) >= windows_.count())
    throw std::logic_error("release of a completion without a window");
  windows_.transition(static_cast<size_t>(c.window), WindowPhase::HostReady, WindowPhase::Free);
}

void UringSource::drain() {
  if (inflight_ == 0) return;
  io_uring_cqe* cqe = nullptr;
  for (;;) {
    const int r = io_uring_wait_cqe_nr(&ring_, &cqe, static_cast<unsigned>(inflight_));
    if (r == 0 || r != -EINTR) break;
  }
}

}  // namespace resid
