#include "adapters/synthetic/walk.hpp"

#include <cstdio>
#include <thread>

#include "core/clock.hpp"
#include "core/mincore.hpp"

namespace resid {

namespace {

constexpr uint64_t kPage = 4096;

// The compute phase: burn CPU (not sleep), as a matmul would.
void busy_work(uint64_t us) {
  if (us == 0) return;
  const uint64_t end = now_ns() + us * 1000;
  volatile uint64_t sink = 0;
  while (now_ns() < end)
    for (uint64_t i = 0; i < 256; ++i) sink = sink + i * 2654435761u;
}

}  // namespace

const char* to_string(SignalKind s) {
  return s == SignalKind::AllThreadsFinished ? "all-threads-finished" : "thread0-started";
}

std::optional<SignalKind> parse_signal(std::string_view s) {
  for (SignalKind k : {SignalKind::AllThreadsFinished, SignalKind::Thread0Started})
    if (s == to_string(k)) return k;
  return std::nullopt;
}

const char* to_string(SyncMode m) { return m == SyncMode::Step ? "step" : "none"; }

std::optional<SyncMode> parse_sync(std::string_view s) {
  if (s == "step") return SyncMode::Step;
  if (s == "none") return SyncMode::None;
  return std::nullopt;
}

Walk::Walk(const WalkConfig& cfg, uint64_t file_bytes, uint64_t steps, const std::byte* base, Pager* pager, Trace& trace)
    : cfg_(cfg),
      file_bytes_(file_bytes),
      chunks_(static_cast<uint32_t>((file_bytes + cfg.chunk_size - 1) / cfg.chunk_size)),
      steps_(steps),
      base_(base),
      pager_(pager),
      trace_(trace),
      done_(cfg.sync == SyncMode::None ? steps : 0),
      begun_(cfg.sync == SyncMode::None ? steps : 0),
      fills_at_begin_(cfg.sync == SyncMode::None ? steps : 0),
      kernel_miss_(cfg.sync == SyncMode::None ? steps : 0) {}

uint64_t Walk::jitter(uint32_t t, uint64_t s) const {
  if (cfg_.jitter_us == 0) return 0;
  return splitmix64(cfg_.jitter_seed * kGolden ^ (static_cast<uint64_t>(t) << 40) ^ s) % (cfg_.jitter_us + 1);
}

uint64_t Walk::chunk_len(uint32_t c) const {
  return std::min<uint64_t>(cfg_.chunk_size, file_bytes_ - static_cast<uint64_t>(c) * cfg_.chunk_size);
}

void Walk::start_kernel_mapping() { probe_kernel_miss(0); }

// Arm A's miss test, just before a step: any page of the chunk not in the page cache.
void Walk::probe_kernel_miss(uint64_t s) {
  const uint32_t c = static_cast<uint32_t>(s % chunks_);
  const PageCount pc = count_resident(base_ + static_cast<uint64_t>(c) * cfg_.chunk_size, chunk_len(c), mincore_buf_);
  next_miss_ = !pc.ok || pc.present < pc.pages;
}

void Walk::step_body(uint32_t t, uint64_t s) {
  const uint32_t c = static_cast<uint32_t>(s % chunks_);
  if (pager_ && t == 0 && cfg_.signal == SignalKind::Thread0Started) pager_->signal(s);
  if (pager_) pager_->enter(c);
  const uint64_t off0 = static_cast<uint64_t>(c) * cfg_.chunk_size;
  const uint64_t pages = chunk_len(c) / kPage;
  uint64_t verified = 0;
  for (uint64_t p = t; p < pages; p += cfg_.threads) {
    const uint64_t off = off0 + p * kPage;
    const VerifyResult r = verify_pattern(base_ + off, off, kPage, cfg_.seed);
    verified += kPage;
    if (!r.bad_words) continue;
    bad_words_ += r.bad_words;
    std::lock_guard lk(err_mu_);
    if (!first_bad_ || r.first->offset < first_bad_->offset) {
      first_bad_ = r.first;
      first_bad_step_ = s;
    }
  }
  bytes_verified_ += verified;
  busy_work(cfg_.compute_us + jitter(t, s));
  if (pager_) pager_->leave(c);
}

// Step s's access is recorded and its signal delivered (in step order).
void Walk::record_step(uint64_t s, bool miss) {
  const uint32_t c = static_cast<uint32_t>(s % chunks_);
  if (pager_) {
    if (cfg_.signal == SignalKind::AllThreadsFinished)
      pager_->step_boundary(s, s + 1);
    else
      pager_->set_step(s + 1);
  }
  accesses_.fetch_add(1, std::memory_order_relaxed);
  if (miss) misses_.fetch_add(1, std::memory_order_relaxed);
  trace_.append(s, c, TraceKind::Access, miss ? kTraceMiss : 0);
  if (bad_words_.load() > 0) {
    stop_ = true;
    stop_reason_ = "verify";
  }
  // Startup audit: after the first pass every declared chunk must have been signalled.
  if (pager_ && s + 1 == chunks_ && !stop_) {
    const auto zero = pager_->audit().zero_signal_chunks();
    if (!zero.empty()) {
      stop_ = true;
      stop_reason_ = "signal audit: " + std::to_string(zero.size()) +
                     " declared chunk(s) received no consumption signal in the first pass (first: " +
                     std::to_string(zero.front()) + ")";
    }
  }
  // A stopped walk signals no more steps: a thread ahead of the others must not wait for one.
  if (pager_ && stop_) pager_->release_ahead_faults();
}

void Walk::end_of_step() {
  if (steps_ == 0) return;
  const uint64_t s = step_;
  const bool miss = pager_ ? pager_->demand_filled_in(static_cast<uint32_t>(s % chunks_), s) : next_miss_;
  record_step(s, miss);
  step_ = s + 1;
  if (!pager_ && step_ < steps_ && !stop_) probe_kernel_miss(step_);
}

// --sync none: the first thread to start step s notes what its miss test needs (the chunk's
// fill count, or arm A's page-cache probe) before any thread reads it; the others wait.
void Walk::free_step_begin(uint64_t s) {
  uint8_t idle = 0;
  if (begun_[s].compare_exchange_strong(idle, 1)) {
    const uint32_t c = static_cast<uint32_t>(s % chunks_);
    if (pager_) {
      fills_at_begin_[s] = pager_->fills_of(c);
    } else {
      std::lock_guard lk(order_mu_);  // the probe's scratch is shared
      probe_kernel_miss(s);
      kernel_miss_[s] = next_miss_;
    }
    begun_[s].store(2);
    return;
  }
  while (begun_[s].load() != 2) std::this_thread::yield();
}

// The last thread to finish step s records every step that is now finished, in order.
void Walk::free_step_done(uint64_t s) {
  if (done_[s].fetch_add(1) + 1 != cfg_.threads) return;
  std::lock_guard lk(order_mu_);
  while (next_to_record_ < steps_ && done_[next_to_record_].load() == cfg_.threads) {
    const uint64_t r = next_to_record_++;
    const bool miss = pager_ ? pager_->fills_of(static_cast<uint32_t>(r % chunks_)) != fills_at_begin_[r] : kernel_miss_[r] != 0;
    record_step(r, miss);
  }
}

void Walk::drive_free(uint32_t t) {
  for (uint64_t s = 0; s < steps_ && !stop_.load(); ++s) {
    free_step_begin(s);
    step_body(t, s);
    free_step_done(s);
  }
}

std::string Walk::error() const {
  std::lock_guard lk(err_mu_);
  if (first_bad_) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "verify: byte at offset %llu is 0x%02x, expected 0x%02x (chunk %llu, step %llu)",
                  static_cast<unsigned long long>(first_bad_->offset), first_bad_->actual, first_bad_->expected,
                  static_cast<unsigned long long>(first_bad_->offset / cfg_.chunk_size),
                  static_cast<unsigned long long>(first_bad_step_));
    return buf;
  }
  return stop_reason_;
}

}  // namespace resid
