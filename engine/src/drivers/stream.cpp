#include "drivers/stream.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <thread>
#include <vector>

#include "adapters/synthetic/pattern.hpp"
#include "core/alloc_count.hpp"
#include "core/checksum.hpp"
#include "core/clock.hpp"
#include "core/errors.hpp"
#include "core/fsutil.hpp"
#include "core/latency.hpp"
#include "core/run_record.hpp"
#include "drivers/stream_input.hpp"
#include "plan/manifest.hpp"
#include "plan/state.hpp"
#include "source/uring.hpp"
#include "source/window.hpp"

namespace resid {

const char* to_string(FaultCell f) {
  switch (f) {
    case FaultCell::None: return "none";
    case FaultCell::ShortRead: return "short-read";
    case FaultCell::Eio: return "eio";
    case FaultCell::OutOfOrder: return "out-of-order";
    case FaultCell::StaleCompletion: return "stale-completion";
    case FaultCell::WrongObject: return "wrong-object";
    case FaultCell::HeldConsumer: return "held-consumer";
    case FaultCell::ResetOutstanding: return "reset-outstanding";
    case FaultCell::ShutdownLiveConsumer: return "shutdown-live-consumer";
    case FaultCell::BundleExtentFailure: return "bundle-extent-failure";
  }
  return "?";
}

std::optional<FaultCell> parse_fault_cell(std::string_view s) {
  for (FaultCell f : {FaultCell::None, FaultCell::ShortRead, FaultCell::Eio, FaultCell::OutOfOrder,
                      FaultCell::StaleCompletion, FaultCell::WrongObject, FaultCell::HeldConsumer,
                      FaultCell::ResetOutstanding, FaultCell::ShutdownLiveConsumer, FaultCell::BundleExtentFailure})
    if (s == to_string(f)) return f;
  return std::nullopt;
}

bool fault_is_fatal(FaultCell f) {
  return f == FaultCell::ShortRead || f == FaultCell::Eio || f == FaultCell::StaleCompletion ||
         f == FaultCell::WrongObject || f == FaultCell::BundleExtentFailure;
}

namespace {

using Clock = std::chrono::steady_clock;

std::string hex64(uint64_t v) {
  char b[17];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(v));
  return b;
}

// The declared sequence: step s streams object step_object[s]; bundle b is steps
// [b*B, min((b+1)*B, steps)). With no reset, reads are issued in (step, piece) order, so
// read index k is piece k - step_first_read[s] of the step s that holds it.
struct Layout {
  std::vector<uint32_t> step_object;
  std::vector<uint64_t> step_first_read;  // steps + 1 entries
  uint64_t steps = 0;
  uint64_t bundles = 0;
  uint32_t bundle = 1;
  uint64_t total_reads() const { return step_first_read.back(); }
  uint64_t step_of_read(uint64_t k) const {
    return static_cast<uint64_t>(std::upper_bound(step_first_read.begin(), step_first_read.end(), k) -
                                 step_first_read.begin()) - 1;
  }
  uint64_t bundle_first_step(uint64_t b) const { return b * bundle; }
  uint64_t bundle_steps(uint64_t b) const { return std::min<uint64_t>(bundle, steps - b * bundle); }
};

// Object checksums computed by reading the file's extents with plain buffered pread (an
// independent path), before the timed stream; the file's pages are dropped afterwards.
std::vector<uint64_t> reference_checksums(const std::string& path, const PlanManifest& m,
                                          const std::vector<bool>& needed) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw InputError("cannot open " + path + " (" + errno_name(errno) + ")");
  std::vector<std::byte> buf(16 * kChecksumBlock);
  std::vector<uint64_t> ref(m.object_count(), 0);
  for (uint32_t oi = 0; oi < m.object_count(); ++oi) {
    if (!needed[oi]) continue;
    const PlanObject& o = m.object(oi);
    uint64_t sum = 0;
    for (uint32_t x = o.first_extent; x < o.first_extent + o.extents; ++x) {
      const PlanExtent& e = m.extents()[x];
      for (uint64_t off = 0; off < e.length; off += buf.size()) {
        const uint64_t want = std::min<uint64_t>(buf.size(), e.length - off);
        uint64_t got = 0;
        while (got < want) {
          const ssize_t n = ::pread(fd, buf.data() + got, want - got, static_cast<off_t>(e.offset + off + got));
          if (n < 0 && errno == EINTR) continue;
          if (n <= 0) {
            const int err = n < 0 ? errno : 0;
            ::close(fd);
            throw RunError("reference read of " + path + " at " + std::to_string(e.offset + off + got) +
                           (n < 0 ? " failed (" + errno_name(err) + ")" : " hit the end of the file"));
          }
          got += static_cast<uint64_t>(n);
        }
        for (uint64_t b = 0; b < want; b += kChecksumBlock)
          sum += hash64(buf.data() + b, std::min(kChecksumBlock, want - b), e.offset + off + b);
      }
    }
    ref[oi] = sum;
  }
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);  // a buffered arm must start cold
  ::close(fd);
  return ref;
}

// The same checksums from the `mkregion` pattern (docs/run-contract.md) without reading the
// file: an independent oracle, and no read warms any cache before the timed stream.
std::vector<uint64_t> pattern_checksums(const PlanManifest& m, const std::vector<bool>& needed, uint64_t seed) {
  std::vector<std::byte> buf(kChecksumBlock + 16);
  std::vector<uint64_t> ref(m.object_count(), 0);
  for (uint32_t oi = 0; oi < m.object_count(); ++oi) {
    if (!needed[oi]) continue;
    const PlanObject& o = m.object(oi);
    uint64_t sum = 0;
    for (uint32_t x = o.first_extent; x < o.first_extent + o.extents; ++x) {
      const PlanExtent& e = m.extents()[x];
      for (uint64_t off = 0; off < e.length; off += kChecksumBlock) {
        const uint64_t at = e.offset + off, len = std::min(kChecksumBlock, e.length - off);
        const uint64_t a = at / 8 * 8;
        fill_pattern(buf.data(), a, (at + len - a + 7) / 8 * 8, seed);
        sum += hash64(buf.data() + (at - a), len, at);
      }
    }
    ref[oi] = sum;
  }
  return ref;
}

// The blocks of `object` consumer `me` of `n` hashes, read from the slot.
uint64_t consumer_partial(const PlanManifest& m, uint32_t object, const std::byte* slot, uint32_t me, uint32_t n) {
  const PlanObject& o = m.object(object);
  uint64_t sum = 0, j = 0;
  for (uint32_t x = o.first_extent; x < o.first_extent + o.extents; ++x) {
    const PlanExtent& e = m.extents()[x];
    for (uint64_t off = 0; off < e.length; off += kChecksumBlock, ++j) {
      if (j % n != me) continue;
      sum += hash64(slot + e.slot_offset + off, std::min(kChecksumBlock, e.length - off), e.offset + off);
    }
  }
  return sum;
}

// State the producer and the consumers share (atomics; the Plan has its own lock).
struct Shared {
  Shared(const PlanManifest& m_, Plan& p, const Layout& l, const std::vector<uint64_t>& r, const StreamConfig& c)
      : m(m_), plan(p), lay(l), ref(r), cfg(c), step_sum(l.steps), step_done(l.steps) {}
  const PlanManifest& m;
  Plan& plan;
  const Layout& lay;
  const std::vector<uint64_t>& ref;
  const StreamConfig& cfg;
  std::vector<std::atomic<uint64_t>> step_sum;
  std::vector<std::atomic<uint32_t>> step_done;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> mismatches{0}, objects_verified{0}, bytes_verified{0};
  std::atomic<int64_t> first_mismatch_step{-1};
  std::atomic<uint8_t> consumer_error{0};  // PlanError of the first consumer failure
  std::atomic<int64_t> consumer_error_step{-1};
  std::atomic<bool> consumer_watchdog{false};
  // held-consumer / shutdown-live-consumer hooks
  std::atomic<bool> holding{false}, refused{false}, held_done{false}, held_survived{true};
  std::atomic<int32_t> held_slot{-1};
  std::atomic<uint64_t> held_step{0}, held_ns{0};

  uint64_t watchdog_ns() const { return static_cast<uint64_t>(cfg.watchdog_s * 1e9); }
  void halt() {
    stop.store(true);
    plan.notify_all();
  }
};

void consumer_fail(Shared& sh, PlanError e, uint64_t step) {
  uint8_t none = 0;
  if (sh.consumer_error.compare_exchange_strong(none, static_cast<uint8_t>(e))) sh.consumer_error_step.store(static_cast<int64_t>(step));
  sh.halt();
}

void consume(Shared& sh, uint32_t me) {
  ReadPathScope scope;
  const uint32_t n = sh.cfg.consumers;
  for (uint64_t s = 0; s < sh.lay.steps; ++s) {
    const uint32_t obj = sh.lay.step_object[s];
    ConsumerTicket t;
    const uint64_t since = now_ns();
    for (;;) {
      if (sh.stop.load()) return;
      const uint64_t v = sh.plan.version();
      auto r = sh.plan.acquire(s, obj);
      if (r.ok()) {
        t = r.value;
        break;
      }
      if (r.error != PlanError::NotPublished) return consumer_fail(sh, r.error, s);
      if (now_ns() - since > sh.watchdog_ns()) {
        sh.consumer_watchdog.store(true);
        return consumer_fail(sh, PlanError::NotPublished, s);
      }
      sh.plan.wait_change(v, Clock::now() + std::chrono::milliseconds(100));
    }
    const uint64_t part = consumer_partial(sh.m, obj, t.data, me, n);
    sh.step_sum[s].fetch_add(part, std::memory_order_relaxed);
    const bool hold = me == 0 && ((sh.cfg.fault == FaultCell::HeldConsumer && s == sh.cfg.fault_at) ||
                                  (sh.cfg.fault == FaultCell::ShutdownLiveConsumer && s + 1 == sh.lay.steps));
    if (hold) {
      // Hold the version until the producer has tried (and been refused) to reuse it or to
      // shut down under it; then check it was not touched meanwhile.
      const uint64_t h0 = now_ns();
      sh.held_slot.store(t.slot);
      sh.held_step.store(s);
      sh.holding.store(true);
      sh.plan.notify_all();
      while (!sh.refused.load() && !sh.stop.load()) {
        if (now_ns() - h0 > sh.watchdog_ns()) {
          sh.consumer_watchdog.store(true);
          break;
        }
        sh.plan.wait_change(sh.plan.version(), Clock::now() + std::chrono::milliseconds(20));
      }
      if (sh.plan.slot_generation(t.slot) != t.generation || sh.plan.slot_phase(t.slot) != SlotPhase::InUse)
        sh.held_survived.store(false);
      sh.held_ns.store(now_ns() - h0);
      sh.holding.store(false);
      sh.held_done.store(true);
    }
    const PlanError e = sh.plan.release(t);
    if (e != PlanError::None) return consumer_fail(sh, e, s);
    if (sh.step_done[s].fetch_add(1, std::memory_order_acq_rel) + 1 == n) {
      const uint64_t sum = sh.step_sum[s].load(std::memory_order_acquire);
      if (sum != sh.ref[obj]) {
        sh.mismatches.fetch_add(1);
        int64_t none = -1;
        sh.first_mismatch_step.compare_exchange_strong(none, static_cast<int64_t>(s));
      }
      sh.objects_verified.fetch_add(1);
      sh.bytes_verified.fetch_add(sh.m.object(obj).logical_bytes);
    }
  }
}

struct ActiveBundle {
  BundleHandle handle = 0;
  uint64_t index = 0;
  uint32_t n = 0;
  uint32_t obj = 0;    // next object (within the bundle) with unissued pieces
  uint32_t piece = 0;  // next piece within that object
  bool issued_all = false;
};

struct FaultLog {
  bool fired = false;
  int64_t read = -1;  // read index it hit
  int32_t window = -1;
  uint64_t presented_tag = 0;
  uint64_t ooo_count = 0;             // out-of-order: completions handed over reversed
  uint32_t reset_outstanding = 0;     // reset: reads in flight at the reset
  PlanError held_refusal = PlanError::None;
  PlanError shutdown_refusal = PlanError::None;
  int64_t faulted_bundle = -1;        // driver bundle index the faulted read belonged to
  uint32_t wrong_object = UINT32_MAX; // wrong-object: whose bytes were read
};

class Producer {
 public:
  Producer(Source& src, UringSource* uring, Plan& plan, Shared& sh, const Layout& lay, const StreamConfig& cfg)
      : src_(src), uring_(uring), plan_(plan), m_(plan.manifest()), sh_(sh), lay_(lay), cfg_(cfg),
        bstate_(lay.bundles, 0), ring_(plan.slot_count()), submit_ns_(src.window_count(), 0),
        ooo_(src.window_count()), objs_(cfg.bundle), tags_(cfg.bundle) {}

  void run();
  void fail_closed();

  bool failing = false;
  PlanError fail_kind = PlanError::None;
  std::string fail_source_error;  // the first rejected completion's own message
  const char* internal = nullptr; // a failure that is not a rejection
  PlanError internal_kind = PlanError::None;
  bool watchdog = false;
  uint64_t reads_issued = 0, completions_seen = 0, invalidated_seen = 0, dropped_seen = 0;
  uint64_t publications_after_rejection = 0;
  uint32_t abandoned = 0;
  LatencyHistogram lat;
  FaultLog fault;
  const std::vector<uint8_t>& bundle_states() const { return bstate_; }

 private:
  bool request_bundles();
  bool issue_reads();
  bool reap(bool wait);
  void on_completion(Completion&& c);
  void process(Completion& c);
  void publish(BundleHandle h);
  void do_reset(uint64_t read);
  void fail_internal(const char* what, PlanError e) {
    if (!failing) {
      failing = true;
      internal = what;
      internal_kind = e;
    }
  }
  Extent wrong_extent(uint32_t obj) const;

  Source& src_;
  UringSource* uring_;
  Plan& plan_;
  const PlanManifest& m_;
  Shared& sh_;
  const Layout& lay_;
  const StreamConfig& cfg_;
  std::vector<uint8_t> bstate_;  // 0 pending, 1 requested, 2 published
  std::vector<ActiveBundle> ring_;
  size_t ring_n_ = 0;
  std::vector<uint64_t> submit_ns_;
  std::vector<Completion> ooo_;
  std::vector<uint32_t> objs_;
  std::vector<uint64_t> tags_;
  uint64_t low_ = 0;
  bool reset_fired_ = false, wrong_fired_ = false;
};

Extent Producer::wrong_extent(uint32_t obj) const {
  const PlanPiece& mine = m_.piece(m_.object(obj).first_piece);
  for (uint32_t d = 1; d < m_.object_count(); ++d) {
    const uint32_t other = (obj + d) % m_.object_count();
    const PlanPiece& p = m_.piece(m_.object(other).first_piece);
    if (p.offset != mine.offset || p.length != mine.length) return p.extent_range();
  }
  return mine.extent_range();
}

bool Producer::request_bundles() {
  bool any = false;
  for (uint64_t b = low_; b < lay_.bundles && ring_n_ < ring_.size(); ++b) {
    if (bstate_[b] != 0) continue;
    const uint64_t s0 = lay_.bundle_first_step(b);
    const uint32_t n = static_cast<uint32_t>(lay_.bundle_steps(b));
    for (uint32_t i = 0; i < n; ++i) {
      objs_[i] = lay_.step_object[s0 + i];
      tags_[i] = s0 + i;
    }
    auto r = plan_.request(objs_.data(), tags_.data(), n);
    if (r.error == PlanError::NoFreeSlot) {
      if (cfg_.fault == FaultCell::HeldConsumer && sh_.holding.load() && !sh_.refused.load()) {
        // The hook: try to reuse the held version's slot now. The Plan must refuse.
        const int32_t held = sh_.held_slot.load();
        fault.held_refusal = plan_.recycle(held);
        if (fault.held_refusal == PlanError::None) fail_internal("the Plan recycled a slot a consumer holds", PlanError::None);
        fault.fired = true;
        sh_.refused.store(true);
        plan_.notify_all();
      }
      break;  // lowest first: no later bundle jumps the queue
    }
    if (!r.ok()) {
      fail_internal("request refused", r.error);
      break;
    }
    ring_[ring_n_++] = ActiveBundle{r.value, b, n, 0, 0, false};
    bstate_[b] = 1;
    any = true;
  }
  return any;
}

void Producer::do_reset(uint64_t read) {
  auto r = plan_.reset();
  if (!r.ok()) return fail_internal("reset refused", r.error);
  reset_fired_ = true;
  fault.fired = true;
  fault.read = static_cast<int64_t>(read);
  fault.reset_outstanding = r.value;
  // Every unpublished bundle was invalidated: request it again (lowest first).
  for (size_t i = 0; i < ring_n_; ++i) bstate_[ring_[i].index] = 0;
  ring_n_ = 0;
}

bool Producer::issue_reads() {
  bool any = false;
  for (size_t i = 0; i < ring_n_; ++i) {
    ActiveBundle& a = ring_[i];
    while (!a.issued_all) {
      const int w = src_.free_window();
      if (w < 0) return any;
      auto sl = plan_.bundle_slot(a.handle, a.obj);
      if (!sl.ok()) {
        fail_internal("bundle slot lookup failed", sl.error);
        return any;
      }
      const uint32_t obj = lay_.step_object[lay_.bundle_first_step(a.index) + a.obj];
      const PlanObject& o = m_.object(obj);
      const uint32_t piece = o.first_piece + a.piece;
      auto t = plan_.begin_read(a.handle, sl.value, piece, w);
      if (!t.ok()) {
        fail_internal("begin_read refused", t.error);
        return any;
      }
      Extent e = m_.piece(piece).extent_range();
      const uint64_t k = reads_issued;
      if (cfg_.fault == FaultCell::WrongObject && !wrong_fired_ && k >= cfg_.fault_at) {
        e = wrong_extent(obj);
        wrong_fired_ = true;
        fault.fired = true;
        fault.read = static_cast<int64_t>(k);
        fault.window = w;
        fault.faulted_bundle = static_cast<int64_t>(a.index);
        fault.wrong_object = m_.object_of_piece_range(e).value_or(UINT32_MAX);
      }
      submit_ns_[static_cast<size_t>(w)] = now_ns();
      if (!src_.submit(e, t.value)) {
        fail_internal("the source refused a read into a free window", PlanError::None);
        return any;
      }
      ++reads_issued;
      if (++a.piece == o.pieces) {
        a.piece = 0;
        if (++a.obj == a.n) a.issued_all = true;
      }
      any = true;
      if (cfg_.fault == FaultCell::ResetOutstanding && !reset_fired_ && k >= cfg_.fault_at) {
        do_reset(k);
        return any;
      }
    }
  }
  return any;
}

void Producer::publish(BundleHandle h) {
  const PlanError e = plan_.publish(h);
  if (e != PlanError::None) return fail_internal("publication refused", e);
  for (size_t i = 0; i < ring_n_; ++i) {
    if (ring_[i].handle != h) continue;
    bstate_[ring_[i].index] = 2;
    for (size_t j = i + 1; j < ring_n_; ++j) ring_[j - 1] = ring_[j];
    --ring_n_;
    break;
  }
  while (low_ < lay_.bundles && bstate_[low_] == 2) ++low_;
}

void Producer::process(Completion& c) {
  auto v = plan_.complete_read(c);
  if (v.ok()) {
    if (!failing) {
      auto o = plan_.begin_copy(c.tag);
      if (!o.ok()) {
        if (o.error != PlanError::StaleEpoch) fail_internal("begin_copy refused", o.error);
      } else {
        std::memcpy(o.value.dst, o.value.src, o.value.bytes);  // the H2D analogue
        auto e = plan_.end_copy(c.tag);
        if (!e.ok()) {
          if (e.error != PlanError::StaleEpoch) fail_internal("end_copy refused", e.error);
        } else if (e.value.bundle_complete) {
          publish(e.value.bundle);
        }
      }
    }
    // After a fatal rejection an accepted read is neither copied nor published; its
    // ticket is abandoned once the source has drained.
  } else if (v.error == PlanError::StaleEpoch) {
    ++invalidated_seen;  // a read from before the reset: retired, as reset promised
  } else if (v.error == PlanError::BundleFailed) {
    ++dropped_seen;  // another piece of its bundle failed earlier
  } else if (!failing) {
    failing = true;
    fail_kind = v.error;
    RejectionPathScope scope;
    fail_source_error = c.error;
  }
  src_.release(c);
}

void Producer::on_completion(Completion&& c) {
  ++completions_seen;
  if (c.window >= 0) lat.record(now_ns() - submit_ns_[static_cast<size_t>(c.window)]);
  if (cfg_.fault == FaultCell::OutOfOrder && !fault.fired && uring_ && completions_seen - 1 >= cfg_.fault_at &&
      uring_->inflight() >= 1) {
    // Hand this completion and every other one in flight to the Plan in reverse order.
    fault.fired = true;
    fault.read = static_cast<int64_t>(completions_seen - 1);
    size_t n = 0;
    ooo_[n++] = std::move(c);
    src_.drain();
    while (n < ooo_.size()) {
      auto d = src_.reap(false);
      if (!d) break;
      ++completions_seen;
      if (d->window >= 0) lat.record(now_ns() - submit_ns_[static_cast<size_t>(d->window)]);
      ooo_[n++] = std::move(*d);
    }
    fault.ooo_count = n;
    for (size_t i = n; i-- > 0;) process(ooo_[i]);
    return;
  }
  process(c);
}

// One completion per call: the caller refills the queue right after it, so the in-flight
// depth stays at its bound instead of draining between batches.
bool Producer::reap(bool wait) {
  auto c = src_.reap(wait);
  if (!c) return false;
  on_completion(std::move(*c));
  return true;
}

void Producer::run() {
  ReadPathScope scope;
  uint64_t last_progress = now_ns();
  while (!failing && low_ < lay_.bundles) {
    const uint64_t v = plan_.version();
    bool progress = plan_.recycle_ready() > 0;
    progress |= request_bundles();
    if (!failing) progress |= issue_reads();
    if (!failing) progress |= reap(!progress);
    if (failing || low_ >= lay_.bundles) break;
    if (sh_.stop.load()) {
      fail_internal("a consumer failed", static_cast<PlanError>(sh_.consumer_error.load()));
      break;
    }
    const uint64_t t = now_ns();
    if (progress) {
      last_progress = t;
      continue;
    }
    if (t - last_progress > sh_.watchdog_ns()) {
      watchdog = true;
      fail_internal("watchdog: no progress", PlanError::None);
      break;
    }
    plan_.wait_change(v, Clock::now() + std::chrono::milliseconds(100));
  }
}

void Producer::fail_closed() {
  ReadPathScope scope;
  // Nothing more is requested, issued or published. Every submitted read completes and is
  // handed to the Plan (valid ones are not copied), then tickets whose completion will
  // never come are abandoned, and the consumers are stopped.
  while (auto c = src_.reap(true)) on_completion(std::move(*c));
  abandoned = plan_.abandon_tickets();
  sh_.halt();
}

}  // namespace

int run_stream(const StreamConfig& cfg) {
  // ---- input (InputError: exit 2, nothing written) ----------------------------------------
  const bool blocking = cfg.source != SourceEngine::Uring;
  if (cfg.out.empty()) throw InputError("--out is required");
  if (cfg.manifest.empty() == !cfg.object_bytes)
    throw InputError("give exactly one of --manifest and --object-bytes");
  check_source_flags(cfg.source, cfg.windows, cfg.depth);
  if (blocking && cfg.register_buffers) throw InputError("--register-buffers needs --source uring");
  if (cfg.window_bytes == 0 || cfg.window_bytes % 4096 != 0)
    throw InputError("--window-bytes must be a positive multiple of 4096");
  if (cfg.slots == 0 || cfg.consumers == 0 || cfg.passes == 0 || cfg.bundle == 0)
    throw InputError("--slots, --consumers, --passes and --bundle must be positive");
  if (cfg.bundle > cfg.slots) throw InputError("--bundle " + std::to_string(cfg.bundle) + " exceeds --slots " + std::to_string(cfg.slots));
  if (cfg.fault != FaultCell::None && cfg.source != SourceEngine::Uring)
    throw InputError(std::string("--fault ") + to_string(cfg.fault) + " needs --source uring (the fault cells run on eight O_DIRECT windows)");
  if (!(cfg.watchdog_s > 0)) throw InputError("--watchdog-s must be positive");

  SourceOptions so = source_options(cfg.source, cfg.windows, cfg.depth);
  so.register_buffers = cfg.register_buffers;
  const uint32_t windows = static_cast<uint32_t>(so.windows), depth = static_cast<uint32_t>(so.depth);
  std::unique_ptr<Source> src = open_source(cfg.source, cfg.file, cfg.window_bytes, so);
  auto* uring = dynamic_cast<UringSource*>(src.get());
  if (src->engine() != cfg.source) throw std::logic_error("the source engine that opened is not the one asked for");

  StreamObjects in = cfg.object_bytes ? tile_objects(src->file_size(), *cfg.object_bytes)
                                      : load_objects_json(cfg.manifest, src->file_size());
  std::vector<uint32_t> order;
  {
    std::map<std::string, uint32_t> index;
    for (uint32_t i = 0; i < in.objects.size(); ++i) index[in.objects[i].name] = i;
    for (const auto& n : in.order) {
      auto it = index.find(n);
      if (it == index.end()) throw InputError("manifest: step order names unknown object '" + n + "'");
      order.push_back(it->second);
    }
  }
  const PlanManifest m = PlanManifest::build(std::move(in.objects), src->file_size(), src->alignment(),
                                             src->window_capacity());
  if (order.empty())
    for (uint32_t i = 0; i < m.object_count(); ++i) order.push_back(i);

  Layout lay;
  lay.bundle = cfg.bundle;
  lay.steps = static_cast<uint64_t>(cfg.passes) * order.size();
  lay.step_object.resize(lay.steps);
  lay.step_first_read.resize(lay.steps + 1, 0);
  for (uint64_t s = 0; s < lay.steps; ++s) {
    lay.step_object[s] = order[s % order.size()];
    lay.step_first_read[s + 1] = lay.step_first_read[s] + m.object(lay.step_object[s]).pieces;
  }
  lay.bundles = (lay.steps + cfg.bundle - 1) / cfg.bundle;
  const uint64_t total_reads = lay.total_reads();

  // Fault points that cannot fire are bad input, not a silent no-op.
  uint64_t bundle_fault_read = 0;
  auto need = [&](bool ok, const std::string& why) {
    if (!ok) throw InputError(std::string("--fault ") + to_string(cfg.fault) + ": " + why);
  };
  switch (cfg.fault) {
    case FaultCell::None: break;
    case FaultCell::ShortRead: {
      bool any = false;
      for (uint64_t k = cfg.fault_at; k < total_reads && !any; ++k) {
        const uint64_t s = lay.step_of_read(k);
        const PlanPiece& p = m.piece(m.object(lay.step_object[s]).first_piece + static_cast<uint32_t>(k - lay.step_first_read[s]));
        any = p.aligned_length >= 2ull * src->alignment();
      }
      need(any, "no read at or after --fault-at " + std::to_string(cfg.fault_at) + " spans two alignment units");
      break;
    }
    case FaultCell::Eio:
    case FaultCell::ResetOutstanding:
      need(cfg.fault_at < total_reads, "--fault-at must be below the " + std::to_string(total_reads) + " reads");
      break;
    case FaultCell::WrongObject: {
      need(cfg.fault_at < total_reads, "--fault-at must be below the " + std::to_string(total_reads) + " reads");
      bool distinct = false;
      for (uint32_t i = 1; i < m.object_count() && !distinct; ++i)
        distinct = m.piece(m.object(i).first_piece).offset != m.piece(m.object(0).first_piece).offset;
      need(distinct, "needs two objects at different offsets");
      break;
    }
    case FaultCell::StaleCompletion:
      need(cfg.fault_at < total_reads && total_reads > windows,
           "needs a read at or after --fault-at on a window that was used before (more reads than windows)");
      break;
    case FaultCell::OutOfOrder:
      need(depth >= 2, "needs --depth >= 2");
      need(cfg.fault_at + depth < total_reads, "--fault-at + depth must be below the " + std::to_string(total_reads) + " reads");
      break;
    case FaultCell::HeldConsumer:
      need(cfg.fault_at + cfg.slots + cfg.bundle <= lay.steps,
           "--fault-at (a step) + --slots + --bundle must not exceed the " + std::to_string(lay.steps) +
               " steps, so the producer needs the held slot");
      break;
    case FaultCell::ShutdownLiveConsumer: break;
    case FaultCell::BundleExtentFailure: {
      bool found = false;
      for (uint64_t b = 0; b < lay.bundles && !found; ++b) {
        const uint64_t first = lay.step_first_read[lay.bundle_first_step(b)];
        const uint64_t last = lay.step_first_read[lay.bundle_first_step(b) + lay.bundle_steps(b)] - 1;
        if (last > first && last >= cfg.fault_at) {
          bundle_fault_read = last;  // the bundle's last read: its other movements already happened
          found = true;
        }
      }
      need(found, "needs a bundle of two or more reads ending at or after --fault-at (use --bundle 2 or multi-extent objects)");
      break;
    }
  }

  make_dirs(cfg.out);

  // ---- set-up: reference checksums, arena, plan ----------------------------------------------
  std::vector<bool> needed(m.object_count(), false);
  for (uint32_t o : order) needed[o] = true;
  const uint64_t ref0 = now_ns();
  const std::vector<uint64_t> ref =
      cfg.pattern_seed ? pattern_checksums(m, needed, *cfg.pattern_seed) : reference_checksums(cfg.file, m, needed);
  const uint64_t reference_ns = now_ns() - ref0;

  const uint64_t slot_bytes = m.slot_bytes_needed();
  const uint64_t arena_bytes = slot_bytes * cfg.slots;
  std::byte* arena = alloc_aligned_buffer(arena_bytes);
  struct ArenaGuard {
    std::byte* p;
    uint64_t n;
    ~ArenaGuard() { free_aligned_buffer(p, n); }
  } arena_guard{arena, arena_bytes};
  PlanConfig pc;
  pc.windows = static_cast<uint32_t>(src->window_count());
  for (uint32_t i = 0; i < cfg.slots; ++i) pc.slot_addresses.push_back(arena + static_cast<uint64_t>(i) * slot_bytes);
  pc.slot_bytes = slot_bytes;
  pc.consumers = cfg.consumers;
  pc.max_bundle = cfg.bundle;
  pc.eager_reconcile = cfg.eager_reconcile;
  Plan plan(m, pc);

  if (uring) {
    switch (cfg.fault) {
      case FaultCell::ShortRead: uring->inject(UringFaultKind::ShortRead, cfg.fault_at); break;
      case FaultCell::Eio: uring->inject(UringFaultKind::Eio, cfg.fault_at); break;
      case FaultCell::StaleCompletion: uring->inject(UringFaultKind::Stale, cfg.fault_at); break;
      case FaultCell::BundleExtentFailure: uring->inject(UringFaultKind::Eio, bundle_fault_read); break;
      default: break;
    }
  }

  Shared sh(m, plan, lay, ref, cfg);
  Producer prod(*src, uring, plan, sh, lay, cfg);
  const AllocCounts alloc0 = alloc_counts();

  // ---- the stream ----------------------------------------------------------------------------
  const uint64_t t0 = now_ns();
  std::vector<std::thread> consumers;
  consumers.reserve(cfg.consumers);
  for (uint32_t i = 0; i < cfg.consumers; ++i) consumers.emplace_back(consume, std::ref(sh), i);
  std::string exception_error;
  try {
    prod.run();
    if (prod.failing) {
      prod.fail_closed();
    } else if (cfg.fault == FaultCell::ShutdownLiveConsumer) {
      // The hook: shut down while consumer 0 holds the last version. The Plan must refuse.
      const uint64_t h0 = now_ns();
      while (!sh.holding.load() && !sh.held_done.load() && !sh.stop.load() && now_ns() - h0 < sh.watchdog_ns())
        plan.wait_change(plan.version(), Clock::now() + std::chrono::milliseconds(20));
      if (sh.holding.load()) {
        prod.fault.shutdown_refusal = plan.shutdown();
        prod.fault.fired = true;
      }
      sh.refused.store(true);
      plan.notify_all();
    }
  } catch (const std::exception& e) {
    exception_error = e.what();
    sh.halt();
  }
  for (auto& th : consumers) th.join();
  const uint64_t wall_ns = now_ns() - t0;
  const AllocCounts alloc1 = alloc_counts();

  // ---- close ---------------------------------------------------------------------------------
  if (!exception_error.empty()) {
    try {
      src->drain();
      while (auto c = src->reap(false)) src->release(*c);
    } catch (const std::exception&) {
    }
    plan.abandon_tickets();
  }
  plan.recycle_ready();
  const PlanError shutdown_error = plan.shutdown();
  if (cfg.eager_reconcile) plan.reconcile();
  const PlanCounters pcnt = plan.counters();
  const PlanBalance bal = plan.balance();
  const SourceStats ss = src->stats();
  const uint64_t src_windows_free = uring ? uring->windows_free() : (src->free_window() >= 0 ? 1 : 0);
  const uint64_t src_inflight = uring ? uring->inflight() : 0;
  const RejectionRecord rej = plan.first_rejection();

  uint64_t steps_consumed = 0, digest = 0;
  for (uint64_t s = 0; s < lay.steps; ++s) {
    if (sh.step_done[s].load() != cfg.consumers) continue;
    ++steps_consumed;
    digest = digest_fold(digest, sh.step_sum[s].load());
  }

  // ---- verdict -------------------------------------------------------------------------------
  auto object_name = [&](uint32_t o) { return o < m.object_count() ? m.object(o).name : std::string("?"); };
  std::string rejection_text;
  if (rej.kind != PlanError::None) {
    rejection_text = std::string(to_string(rej.kind)) + " completion for object '" + object_name(rej.object) +
                     "' (piece " + std::to_string(rej.piece) + ", window " + std::to_string(rej.window) + ", slot " +
                     std::to_string(rej.slot) + ", generation " + std::to_string(rej.generation) + ", epoch " +
                     std::to_string(rej.epoch) + ")";
    if (rej.kind == PlanError::WrongObject && rej.claimed_object != UINT32_MAX)
      rejection_text += " carried the bytes of object '" + object_name(rej.claimed_object) + "'";
    if (rej.kind == PlanError::StaleGeneration)
      rejection_text += ": tag " + hex64(rej.tag) + " is not the window's live ticket";
  }
  std::string error;
  if (!exception_error.empty()) {
    error = "internal: " + exception_error;
  } else if (prod.failing && prod.fail_kind != PlanError::None) {
    error = "rejected " + rejection_text;
    if (!prod.fail_source_error.empty()) error += " (" + prod.fail_source_error + ")";
    error += "; nothing of its bundle was published";
  } else if (prod.failing) {
    error = std::string(prod.internal ? prod.internal : "failed");
    if (prod.internal_kind != PlanError::None) error += std::string(" (") + to_string(prod.internal_kind) + ")";
    if (sh.consumer_error.load())
      error += ": consumer at step " + std::to_string(sh.consumer_error_step.load()) + ": " +
               to_string(static_cast<PlanError>(sh.consumer_error.load())) +
               (sh.consumer_watchdog.load() ? " (watchdog)" : "");
  } else if (sh.consumer_error.load()) {
    error = "consumer at step " + std::to_string(sh.consumer_error_step.load()) + ": " +
            to_string(static_cast<PlanError>(sh.consumer_error.load())) + (sh.consumer_watchdog.load() ? " (watchdog)" : "");
  } else if (sh.mismatches.load() > 0) {
    const int64_t s = sh.first_mismatch_step.load();
    error = "verify: " + std::to_string(sh.mismatches.load()) + " object(s) differ from the file; first at step " +
            std::to_string(s) + " (object '" + object_name(lay.step_object[static_cast<size_t>(s)]) + "')";
  } else if (pcnt.reconcile_violations > 0) {
    error = "reconcile: " + std::to_string(pcnt.reconcile_violations) + " invariant violation(s); first: " +
            plan.first_violation();
  } else if (shutdown_error != PlanError::None) {
    error = std::string("shutdown refused: ") + to_string(shutdown_error);
  } else if (!bal.balanced() || src_inflight != 0 || src_windows_free != src->window_count()) {
    error = "unbalanced at close: " + std::to_string(bal.live_tickets) + " live ticket(s), " +
            std::to_string(bal.windows_free) + "/" + std::to_string(bal.windows) + " plan windows free, " +
            std::to_string(src_windows_free) + "/" + std::to_string(src->window_count()) + " source windows free";
  } else if (steps_consumed != lay.steps) {
    error = "only " + std::to_string(steps_consumed) + " of " + std::to_string(lay.steps) + " steps were consumed";
  }
  if (!error.empty() && pcnt.reconcile_violations > 0 && error.rfind("reconcile", 0) != 0)
    error += "; reconcile: " + plan.first_violation();

  // Fault cells: what was published, what was rejected, and the balance at the end.
  nlohmann::json fault_json = nullptr;
  if (cfg.fault != FaultCell::None) {
    FaultLog& f = prod.fault;
    if (uring && uring->fault_report().fired) {
      const UringFaultReport r = uring->fault_report();
      f.fired = true;
      f.read = static_cast<int64_t>(r.submission);
      f.window = r.window;
      f.presented_tag = r.presented_tag;
    }
    if (f.fired && f.read >= 0 && f.faulted_bundle < 0 && fault_is_fatal(cfg.fault))
      f.faulted_bundle = static_cast<int64_t>(lay.step_of_read(static_cast<uint64_t>(f.read)) / lay.bundle);
    const PlanError expected = [&] {
      switch (cfg.fault) {
        case FaultCell::ShortRead: return PlanError::ShortRead;
        case FaultCell::Eio:
        case FaultCell::BundleExtentFailure: return PlanError::ReadFailed;
        case FaultCell::StaleCompletion: return PlanError::StaleGeneration;
        case FaultCell::WrongObject: return PlanError::WrongObject;
        default: return PlanError::None;
      }
    }();
    const bool balanced = bal.balanced() && src_inflight == 0 && src_windows_free == src->window_count();
    const bool faulted_published =
        f.faulted_bundle >= 0 && prod.bundle_states()[static_cast<size_t>(f.faulted_bundle)] == 2;
    std::string why;  // why the cell does not validate
    bool pass = f.fired && balanced && sh.mismatches.load() == 0 && pcnt.reconcile_violations == 0;
    if (!f.fired) why = "the fault did not fire";
    if (fault_is_fatal(cfg.fault)) {
      if (f.fired && prod.fail_kind != expected) {
        pass = false;
        why = std::string("expected a ") + to_string(expected) + " rejection, got " +
              (prod.fail_kind == PlanError::None ? std::string("none") : to_string(prod.fail_kind));
      }
      if (faulted_published) {
        pass = false;
        why = "the faulted bundle was published";
      }
      if (f.fired && error.empty()) error = "the fault was not rejected";
    } else {
      if (f.fired && !error.empty()) pass = false;
      if (cfg.fault == FaultCell::HeldConsumer &&
          (f.held_refusal != PlanError::ConsumersLive || !sh.held_survived.load())) {
        pass = false;
        why = std::string("reuse of the held version was not refused (") + to_string(f.held_refusal) + ")";
      }
      if (cfg.fault == FaultCell::ShutdownLiveConsumer &&
          (f.shutdown_refusal != PlanError::ConsumersLive || !sh.held_survived.load())) {
        pass = false;
        why = std::string("shutdown under a live consumer was not refused (") + to_string(f.shutdown_refusal) + ")";
      }
      if (cfg.fault == FaultCell::ResetOutstanding && (f.reset_outstanding == 0 || pcnt.tickets_invalidated == 0)) {
        pass = false;
        why = "the reset found no outstanding source work";
      }
      if (cfg.fault == FaultCell::OutOfOrder && f.ooo_count < 2) {
        pass = false;
        why = "fewer than two completions were reordered";
      }
      if (!why.empty() && error.empty()) error = "fault " + std::string(to_string(cfg.fault)) + ": " + why;
    }
    if (!error.empty() && error.rfind("fault ", 0) != 0) error = "fault " + std::string(to_string(cfg.fault)) + ": " + error;
    nlohmann::json at = nullptr;
    if (f.read >= 0) {
      const uint64_t s = lay.step_of_read(static_cast<uint64_t>(f.read));
      at = {{"read", f.read},
            {"step", s},
            {"object", object_name(lay.step_object[s])},
            {"window", f.window >= 0 ? nlohmann::json(f.window) : nlohmann::json(nullptr)}};
    }
    if (cfg.fault == FaultCell::HeldConsumer || cfg.fault == FaultCell::ShutdownLiveConsumer)
      at = {{"step", sh.held_step.load()}, {"object", object_name(lay.step_object[sh.held_step.load()])},
            {"slot", sh.held_slot.load()}, {"held_ns", sh.held_ns.load()}};
    nlohmann::json rejected = nlohmann::json::object();  // completions the Plan did not accept, by kind
    for (PlanError e : {PlanError::UnknownTicket, PlanError::StaleEpoch, PlanError::StaleGeneration,
                        PlanError::WrongObject, PlanError::WrongExtent, PlanError::WindowMismatch,
                        PlanError::ShortRead, PlanError::ReadFailed, PlanError::ExtentOutsideFile,
                        PlanError::ExtentTooLarge, PlanError::SizeMismatch, PlanError::BundleFailed})
      if (const uint64_t n = pcnt.errors[static_cast<size_t>(e)]) rejected[to_string(e)] = n;
    fault_json = {{"cell", to_string(cfg.fault)},
                  {"class", fault_is_fatal(cfg.fault) ? "fatal" : "recoverable"},
                  {"fault_at", cfg.fault_at},
                  {"fired", f.fired},
                  {"injected_at", at},
                  {"expected_rejection", expected == PlanError::None ? nlohmann::json(nullptr) : nlohmann::json(to_string(expected))},
                  {"rejection", prod.fail_kind == PlanError::None ? nlohmann::json(nullptr) : nlohmann::json(to_string(prod.fail_kind))},
                  {"rejected", rejected},
                  {"published", {{"bundles", pcnt.bundles_published}, {"objects", pcnt.objects_published}}},
                  {"faulted_bundle", f.faulted_bundle >= 0 ? nlohmann::json(f.faulted_bundle) : nlohmann::json(nullptr)},
                  {"faulted_bundle_published", faulted_published},
                  {"reordered_completions", f.ooo_count},
                  {"reset_outstanding", f.reset_outstanding},
                  {"tickets_invalidated", pcnt.tickets_invalidated},
                  {"tickets_abandoned", pcnt.tickets_abandoned},
                  {"reuse_refusal", f.held_refusal == PlanError::None ? nlohmann::json(nullptr) : nlohmann::json(to_string(f.held_refusal))},
                  {"shutdown_refusal", f.shutdown_refusal == PlanError::None ? nlohmann::json(nullptr) : nlohmann::json(to_string(f.shutdown_refusal))},
                  {"held_version_untouched", sh.held_survived.load()},
                  {"windows_free_at_close", src_windows_free},
                  {"tickets_balanced", bal.tickets_balanced},
                  {"balanced", balanced},
                  {"outcome", !f.fired ? "not-fired" : (fault_is_fatal(cfg.fault) ? (prod.failing ? "failed-closed" : "not-rejected")
                                                                                : (error.empty() ? "recovered" : "failed"))},
                  {"pass", pass && why.empty()},
                  {"why", why.empty() ? nlohmann::json(nullptr) : nlohmann::json(why)}};
  }

  // ---- run.json ------------------------------------------------------------------------------
  nlohmann::json j;
  j["schema_version"] = kRunSchemaVersion;
  j["subcommand"] = "stream";
  j["status"] = error.empty() ? "ok" : "failed";
  j["error"] = error.empty() ? nlohmann::json(nullptr) : nlohmann::json(error);
  j["source_engine"] = to_string(src->engine());
  j["config"] = {{"file", cfg.file},
                 {"manifest", cfg.manifest.empty() ? nlohmann::json(nullptr) : nlohmann::json(cfg.manifest)},
                 {"object_bytes", cfg.object_bytes ? nlohmann::json(*cfg.object_bytes) : nlohmann::json(nullptr)},
                 {"source", to_string(cfg.source)},
                 {"windows", windows},
                 {"depth", depth},
                 {"window_bytes", cfg.window_bytes},
                 {"register_buffers", cfg.register_buffers},
                 {"slots", cfg.slots},
                 {"consumers", cfg.consumers},
                 {"passes", cfg.passes},
                 {"bundle", cfg.bundle},
                 {"eager_reconcile", cfg.eager_reconcile},
                 {"fault", to_string(cfg.fault)},
                 {"fault_at", cfg.fault_at},
                 {"watchdog_s", cfg.watchdog_s},
                 {"pattern_seed", cfg.pattern_seed ? nlohmann::json(*cfg.pattern_seed) : nlohmann::json(nullptr)}};
  j["file"] = {{"path", cfg.file}, {"bytes", src->file_size()}};
  j["manifest"] = {{"input", cfg.object_bytes ? "object-bytes" : "objects.json"},
                   {"objects", m.object_count()},
                   {"extents", m.extents().size()},
                   {"reads", m.pieces().size()},
                   {"alignment", m.alignment()},
                   {"logical_bytes", m.logical_bytes()},
                   {"aligned_bytes", m.aligned_bytes()},
                   {"padding_bytes", m.padding_bytes()},
                   {"largest_object_aligned_bytes", m.largest_aligned_bytes()},
                   {"steps_per_pass", order.size()},
                   {"steps", lay.steps},
                   {"bundles", lay.bundles},
                   {"reads_planned", total_reads}};
  j["windows"] = {{"count", src->window_count()},
                  {"bytes_each", src->window_capacity()},
                  {"total_bytes", src->window_bytes()},
                  {"alignment", kHugeAlign},
                  {"huge_page_advised", true},
                  {"registered", uring ? uring->registered_buffers() : false},
                  {"free_at_close", src_windows_free},
                  {"plan_free_at_close", bal.windows_free}};
  j["slots"] = {{"count", cfg.slots}, {"bytes_each", slot_bytes}, {"arena_bytes", arena_bytes}};
  j["source_stats"] = {{"engine", to_string(src->engine())},
                       {"alignment", src->alignment()},
                       {"depth_limit", depth},
                       {"submissions", ss.reads},
                       {"completions", ss.completions},
                       {"peak_inflight", ss.peak_inflight},
                       {"logical_bytes", ss.logical_bytes},
                       {"physical_bytes", ss.physical_bytes},
                       {"padding_bytes", ss.padding_bytes},
                       {"rejections", ss.rejections},
                       {"read_ns", ss.read_ns},
                       {"inflight_at_close", src_inflight}};
  j["latency_ns"] = {{"reads", prod.lat.count()},
                     {"read_p50", prod.lat.quantile(0.5)},
                     {"read_p99", prod.lat.quantile(0.99)},
                     {"read_max", prod.lat.max()}};
  nlohmann::json errors = nlohmann::json::object();
  for (size_t k = 1; k < pcnt.errors.size(); ++k)
    if (pcnt.errors[k]) errors[to_string(static_cast<PlanError>(k))] = pcnt.errors[k];
  nlohmann::json first_rej = nullptr;
  if (rej.kind != PlanError::None)
    first_rej = {{"kind", to_string(rej.kind)}, {"object", object_name(rej.object)}, {"piece", rej.piece},
                 {"window", rej.window}, {"slot", rej.slot}, {"generation", rej.generation}, {"epoch", rej.epoch},
                 {"claimed_extent", {{"offset", rej.claimed_offset}, {"length", rej.claimed_length}}},
                 {"claimed_object", rej.claimed_object == UINT32_MAX ? nlohmann::json(nullptr) : nlohmann::json(object_name(rej.claimed_object))},
                 {"text", rejection_text}};
  j["plan"] = {{"epoch", plan.epoch()},
               {"transitions", pcnt.transitions},
               {"requests", pcnt.requests},
               {"bundles_published", pcnt.bundles_published},
               {"objects_published", pcnt.objects_published},
               {"bytes_published", pcnt.bytes_published},
               {"bundles_failed", pcnt.bundles_failed},
               {"bundles_invalidated", pcnt.bundles_invalidated},
               {"tickets", {{"issued", pcnt.tickets_issued}, {"retired", pcnt.tickets_retired},
                            {"copied", pcnt.tickets_copied}, {"rejected", pcnt.tickets_rejected},
                            {"invalidated", pcnt.tickets_invalidated}, {"abandoned", pcnt.tickets_abandoned},
                            {"live", bal.live_tickets}, {"balanced", bal.tickets_balanced}}},
               {"completions_refused", pcnt.completions_refused},
               {"consumers", {{"declared", cfg.consumers}, {"acquires", pcnt.consumer_acquires},
                              {"releases", pcnt.consumer_releases}, {"balanced", bal.consumers_balanced}}},
               {"recycles", pcnt.recycles},
               {"recycle_refusals", pcnt.recycle_refusals},
               {"shutdown_refusals", pcnt.shutdown_refusals},
               {"resets", pcnt.resets},
               {"versions_discarded", pcnt.versions_discarded},
               {"refusals", errors},
               {"first_rejection", first_rej},
               {"reconcile_checks", pcnt.reconcile_checks},
               {"reconcile_violations", pcnt.reconcile_violations},
               {"first_violation", pcnt.reconcile_violations ? nlohmann::json(plan.first_violation()) : nlohmann::json(nullptr)},
               {"shutdown", shutdown_error == PlanError::None ? "ok" : to_string(shutdown_error)},
               {"slots_vacant_at_close", bal.slots_vacant},
               {"balanced", bal.balanced()}};
  const int64_t fm = sh.first_mismatch_step.load();
  j["verify"] = {{"checksum", "hash64 per 64 KiB block seeded by file offset, summed per object"},
                 {"reference", cfg.pattern_seed ? "pattern" : "file"},
                 {"steps", lay.steps},
                 {"steps_consumed", steps_consumed},
                 {"objects_verified", sh.objects_verified.load()},
                 {"bytes_verified", sh.bytes_verified.load()},
                 {"mismatches", sh.mismatches.load()},
                 {"first_mismatch_step", fm >= 0 ? nlohmann::json(fm) : nlohmann::json(nullptr)},
                 {"digest", hex64(digest)}};
  j["allocations"] = {{"counter_installed", alloc_hook_installed()},
                      {"read_path_after_start", alloc1.read_path - alloc0.read_path},
                      {"rejection_path_after_start", alloc1.rejection_path - alloc0.rejection_path}};
  j["fault"] = fault_json;
  j["counters"] = {{"reads_issued", prod.reads_issued},
                   {"completions", prod.completions_seen},
                   {"stale_epoch_completions", prod.invalidated_seen},
                   {"dropped_completions", prod.dropped_seen},
                   {"tickets_abandoned_at_close", prod.abandoned}};
  j["reference_ns"] = reference_ns;
  j["wall_ns"] = wall_ns;
  const double secs = static_cast<double>(wall_ns) / 1e9;
  const double gib = static_cast<double>(1ull << 30);
  j["throughput_gib_s"] = secs > 0 ? static_cast<double>(pcnt.bytes_published) / gib / secs : 0.0;
  j["physical_throughput_gib_s"] = secs > 0 ? static_cast<double>(ss.physical_bytes) / gib / secs : 0.0;
  write_run_dir(cfg.out, std::nullopt, j);
  if (!error.empty()) {
    std::fprintf(stderr, "residctl: run failed: %s\n", error.c_str());
    return 1;
  }
  return 0;
}

}  // namespace resid
