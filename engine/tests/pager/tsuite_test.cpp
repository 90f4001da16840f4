// The T-suite: the real Pager on a real temp file, eager reconcile on, and at the end of
// every test the pager's books agree with the kernel (reconcile_mismatches == 0).
// Small chunks (64 KiB) and small files keep the whole suite to seconds.
// RESID_TSUITE_HUGE=move|collapse runs the same suite with 2 MiB chunks published as huge
// pages in that mode (PagerConfig::huge; ctest runs it as tsuite_huge_move); the tests
// that need a particular mode or chunk size set their own.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <functional>
#include <optional>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <barrier>
#include <chrono>
#include <random>
#include <thread>
#include <tuple>
#include <vector>

#include "adapters/synthetic/pattern.hpp"
#include "core/errors.hpp"
#include "pager/pager.hpp"
#include "pager/trace.hpp"
#include "source/fault.hpp"
#include "plan/state.hpp"
#include "policy/declared.hpp"
#include "policy/policy.hpp"
#include "source/source.hpp"
#include "util/test_util.hpp"

using namespace resid;

static std::string EngineName(const ::testing::TestParamInfo<SourceEngine>& p) {
  return to_string(p.param);
}
using namespace std::chrono_literals;

namespace {

HugeChunks huge_mode_from_env() {
  const char* v = std::getenv("RESID_TSUITE_HUGE");
  return v && *v ? parse_huge_chunks(v).value_or(HugeChunks::Off) : HugeChunks::Off;
}
const HugeChunks kHugeMode = huge_mode_from_env();
const uint64_t kChunk = kHugeMode == HugeChunks::Off ? 64 << 10 : 2 << 20;

// Why the huge mode cannot run here (the kernel lacks UFFDIO_MOVE, ...), or nullopt.
std::optional<std::string> huge_mode_unavailable() {
  if (kHugeMode == HugeChunks::Off) return std::nullopt;
  static const std::optional<std::string> why = []() -> std::optional<std::string> {
    test::TempDir dir;
    const std::string path = dir.file("probe.bin");
    test::write_pattern_file(path, kChunk, 1);
    PagerConfig cfg;
    cfg.chunk_size = kChunk;
    cfg.budget_chunks = 1;
    cfg.huge = kHugeMode;
    try {
      Pager p(open_source(SourceEngine::Buffered, path, kChunk), make_policy(PolicyKind::Lru, 1), cfg);
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::nullopt;
  }();
  return why;
}
constexpr uint64_t kPage = 4096;
constexpr uint64_t kSeed = 11;

#define SKIP_WITHOUT_UFFD()                                              \
  do {                                                                   \
    if (auto why = test::uffd_unavailable()) GTEST_SKIP() << *why;       \
    if (auto why = huge_mode_unavailable()) GTEST_SKIP() << *why;        \
  } while (0)

struct Rig {
  test::TempDir dir;
  std::string path;
  uint64_t bytes;
  Trace trace{4096};
  std::unique_ptr<Pager> pager;

  Rig(uint64_t file_bytes, uint64_t budget_chunks, PolicyKind kind,
      SourceEngine engine = SourceEngine::Direct, uint32_t prefetch_depth = 0, double watchdog_s = 20,
      bool protect = false)
      : path(dir.file("region.bin")), bytes(file_bytes) {
    test::write_pattern_file(path, file_bytes, kSeed);
    PagerConfig cfg;
    cfg.chunk_size = kChunk;
    cfg.budget_chunks = budget_chunks;
    cfg.prefetch_depth = prefetch_depth;
    cfg.eager_reconcile = true;
    cfg.watchdog_s = watchdog_s;
    cfg.huge = kHugeMode;
    cfg.protect = protect;
    const uint32_t chunks = static_cast<uint32_t>((file_bytes + kChunk - 1) / kChunk);
    pager = std::make_unique<Pager>(open_source(engine, path, kChunk), make_policy(kind, chunks), cfg, &trace);
    pager->start();
  }

  // Read and verify every page of chunk c as a consumer; returns the wrong words.
  uint64_t read_chunk(ChunkId c) {
    pager->enter(c);
    const uint64_t off = c * kChunk;
    const uint64_t len = pager->chunk_length(c);
    const uint64_t bad = verify_pattern(pager->base() + off, off, len, kSeed).bad_words;
    pager->leave(c);
    return bad;
  }

  void expect_books_match_kernel() {
    EXPECT_EQ(pager->reconcile_now(), 0u) << pager->first_mismatch();
    const PagerStats st = pager->stats();
    EXPECT_GT(st.reconcile_checks, 0u);
    EXPECT_EQ(st.reconcile_mismatches, 0u) << pager->first_mismatch();
    EXPECT_FALSE(pager->failed()) << pager->error();
    if (kHugeMode == HugeChunks::Move && st.demand_fills + st.prefetch_fills > 1) {
      EXPECT_GT(st.move_fills, 0u) << "no chunk was published by UFFDIO_MOVE";
      // Only a transient EBUSY (another kernel path holding a source folio for a moment,
      // retried first) may leave a chunk to COPY; most chunks must still be moved.
      EXPECT_EQ(st.move_fallbacks, st.move_busy_fallbacks) << "first errno " << st.move_first_errno;
      EXPECT_GT(st.move_fills, st.move_fallbacks);
    }
    if (kHugeMode == HugeChunks::Collapse && st.demand_fills + st.prefetch_fills > 1) {
      EXPECT_GT(st.collapses, 0u) << "no chunk was collapsed";
    }
  }
};

}  // namespace

// T1: every byte the pager publishes equals the file, including a short tail chunk.
class TSuiteT1 : public ::testing::TestWithParam<SourceEngine> {};

TEST_P(TSuiteT1, T1_ByteExactFills) {
  SKIP_WITHOUT_UFFD();
  const uint64_t bytes = 16 * kChunk + 3 * kPage;  // 17 chunks, the last one 3 pages
  Rig rig(bytes, 17, PolicyKind::Declared, GetParam());
  ASSERT_EQ(rig.pager->chunks(), 17u);
  EXPECT_EQ(rig.pager->chunk_length(16), 3 * kPage);
  // Compare against the file itself, not only the pattern.
  std::vector<std::byte> file(bytes);
  FILE* f = std::fopen(rig.path.c_str(), "rb");
  ASSERT_TRUE(f);
  ASSERT_EQ(std::fread(file.data(), 1, bytes, f), bytes);
  std::fclose(f);
  for (ChunkId c = 0; c < 17; ++c) {
    rig.pager->enter(c);
    EXPECT_EQ(std::memcmp(rig.pager->base() + c * kChunk, file.data() + c * kChunk, rig.pager->chunk_length(c)), 0)
        << "chunk " << c;
    rig.pager->leave(c);
  }
  const PagerStats st = rig.pager->stats();
  EXPECT_EQ(st.demand_fills, 17u);
  EXPECT_EQ(st.evictions, 0u);
  EXPECT_EQ(rig.pager->source_stats().logical_bytes, bytes);
  rig.expect_books_match_kernel();
  rig.pager->shutdown();
}

INSTANTIATE_TEST_SUITE_P(Engines, TSuiteT1, ::testing::Values(SourceEngine::Buffered, SourceEngine::Direct),
                         EngineName);

// T2: with a budget smaller than the region, evicted chunks re-fault and refill exactly.
TEST(TSuite, T2_RefaultAfterEviction) {
  SKIP_WITHOUT_UFFD();
  for (PolicyKind kind : {PolicyKind::Lru, PolicyKind::Declared, PolicyKind::Zero}) {
    Rig rig(16 * kChunk, 4, kind);
    for (int pass = 0; pass < 3; ++pass)
      for (ChunkId c = 0; c < 16; ++c) ASSERT_EQ(rig.read_chunk(c), 0u) << to_string(kind) << " chunk " << c;
    const PagerStats st = rig.pager->stats();
    EXPECT_GT(st.evictions, 0u);
    uint64_t refilled = 0;
    for (ChunkId c = 0; c < 16; ++c) refilled += rig.pager->fills_of(c) > 1;
    EXPECT_GT(refilled, 0u) << to_string(kind);
    if (kind == PolicyKind::Lru || kind == PolicyKind::Zero) {
      EXPECT_EQ(st.demand_fills, 48u) << to_string(kind);  // a cyclic scan defeats both
    }
    rig.expect_books_match_kernel();
    rig.pager->shutdown();
  }
}

// T3: resident chunks never exceed the budget, in the books or in the kernel.
TEST(TSuite, T3_BudgetNeverExceeded) {
  SKIP_WITHOUT_UFFD();
  constexpr uint64_t kBudget = 3;
  Rig rig(24 * kChunk, kBudget, PolicyKind::Lru);
  std::atomic<uint64_t> bad{0};
  std::atomic<uint64_t> kernel_over{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 2; ++t) {  // 2 consumers hold at most 2 chunks: budget 3 always has room
    ts.emplace_back([&, t] {
      std::mt19937 rng(1234 + t);
      for (int i = 0; i < 150; ++i) bad += rig.read_chunk(static_cast<ChunkId>(rng() % 24));
    });
  }
  std::thread sampler([&] {  // an independent mincore view while the drivers run
    std::vector<unsigned char> v(24 * kChunk / kPage);
    for (int i = 0; i < 200; ++i) {
      if (::mincore(const_cast<std::byte*>(rig.pager->base()), 24 * kChunk, v.data()) == 0) {
        uint64_t present = 0;
        for (auto b : v) present += b & 1;
        if (present > kBudget * kChunk / kPage) ++kernel_over;
      }
      std::this_thread::sleep_for(200us);
    }
  });
  for (auto& t : ts) t.join();
  sampler.join();
  EXPECT_EQ(bad.load(), 0u);
  EXPECT_EQ(kernel_over.load(), 0u);
  const PagerStats st = rig.pager->stats();
  EXPECT_LE(st.max_resident_chunks, kBudget);
  EXPECT_LE(st.max_present_pages, kBudget * kChunk / kPage);
  EXPECT_GT(st.evictions, 0u);
  rig.expect_books_match_kernel();
  rig.pager->shutdown();
}

// T4: many threads fault on one chunk at once: exactly one fill, everyone sees the bytes.
TEST(TSuite, T4_ConcurrentFaultsOnOneChunk) {
  SKIP_WITHOUT_UFFD();
  constexpr int kThreads = 8;
  constexpr ChunkId kChunks = 12;
  Rig rig(kChunks * kChunk, kChunks, PolicyKind::Declared);
  std::atomic<uint64_t> bad{0};
  std::barrier go(kThreads);
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t) {
    ts.emplace_back([&, t] {
      for (ChunkId c = 0; c < kChunks; ++c) {
        go.arrive_and_wait();  // everyone hits chunk c at the same moment
        rig.pager->enter(c);
        const uint64_t off = c * kChunk + (t % (kChunk / kPage)) * kPage;
        bad += verify_pattern(rig.pager->base() + off, off, kPage, kSeed).bad_words;
        bad += verify_pattern(rig.pager->base() + c * kChunk, c * kChunk, kChunk, kSeed).bad_words;
        rig.pager->leave(c);
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(bad.load(), 0u);
  for (ChunkId c = 0; c < kChunks; ++c) EXPECT_EQ(rig.pager->fills_of(c), 1u) << "chunk " << c;
  rig.expect_books_match_kernel();
  rig.pager->shutdown();
  // After the drain every message read has been answered: a fill or a wake.
  const PagerStats st = rig.pager->stats();
  EXPECT_EQ(st.demand_fills, kChunks);
  EXPECT_GE(st.faults_handled, kChunks);
  EXPECT_EQ(st.faults_handled, st.demand_fills + st.spurious_faults);
}

// T5: the consumption cursor audit: one signal per step, in order; a chunk that never
// gets a signal is reported.
TEST(TSuite, T5_ConsumptionCursorAudit) {
  SKIP_WITHOUT_UFFD();
  constexpr ChunkId kChunks = 8;
  {
    Rig rig(kChunks * kChunk, 3, PolicyKind::Declared);
    for (uint64_t s = 0; s < 2 * kChunks; ++s) {
      ASSERT_EQ(rig.read_chunk(static_cast<ChunkId>(s % kChunks)), 0u);
      rig.pager->step_boundary(s, s + 1);
    }
    const SignalAudit a = rig.pager->audit();
    EXPECT_EQ(a.signals(), 2u * kChunks);
    EXPECT_EQ(a.out_of_order(), 0u);
    EXPECT_TRUE(a.zero_signal_chunks().empty());
    for (ChunkId c = 0; c < kChunks; ++c) EXPECT_EQ(a.count(c), 2u);
    // The trace holds exactly one signal per step, for that step's chunk.
    std::vector<int> per_step(2 * kChunks, 0);
    for (const auto& r : rig.trace.sorted())
      if (r.kind == static_cast<uint8_t>(TraceKind::Signal)) {
        ASSERT_LT(r.step, per_step.size());
        EXPECT_EQ(r.chunk, r.step % kChunks);
        ++per_step[r.step];
      }
    for (int n : per_step) EXPECT_EQ(n, 1);
    EXPECT_EQ(rig.pager->stats().signals, 2u * kChunks);
    rig.expect_books_match_kernel();
    rig.pager->shutdown();
  }
  {
    Rig rig(kChunks * kChunk, 3, PolicyKind::Declared);
    for (uint64_t s = 0; s < kChunks; ++s) {
      ASSERT_EQ(rig.read_chunk(static_cast<ChunkId>(s)), 0u);
      if (s != 5) rig.pager->signal(s);  // a signal hooked to the wrong place misses chunk 5
    }
    const SignalAudit a = rig.pager->audit();
    EXPECT_EQ(a.zero_signal_chunks(), std::vector<uint32_t>{5});
    EXPECT_EQ(a.out_of_order(), 1u);
    rig.expect_books_match_kernel();
    rig.pager->shutdown();
  }
}

// T6: the application unmaps part of the region: the pager drops those chunks, keeps
// serving the rest, and never copies into the hole (even when something else is mapped there).
TEST(TSuite, T6_PartialUnmaps) {
  SKIP_WITHOUT_UFFD();
  constexpr ChunkId kChunks = 16;
  Rig rig(kChunks * kChunk, 6, PolicyKind::Declared);
  for (ChunkId c = 0; c < 6; ++c) ASSERT_EQ(rig.read_chunk(c), 0u);
  auto* base = const_cast<std::byte*>(rig.pager->base());
  // Whole chunks 2..5 (2 and 3 resident), and the second half of chunk 9.
  ASSERT_EQ(::munmap(base + 2 * kChunk, 4 * kChunk), 0);
  ASSERT_EQ(::munmap(base + 9 * kChunk + kChunk / 2, kChunk / 2), 0);
  // Someone else's mapping lands in part of the hole; the pager must never write it.
  void* other = ::mmap(base + 2 * kChunk, 2 * kChunk, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  ASSERT_NE(other, MAP_FAILED);
  std::memset(other, 0xAB, 2 * kChunk);
  std::vector<uint64_t> fills_before(kChunks);
  for (ChunkId c = 0; c < kChunks; ++c) fills_before[c] = rig.pager->fills_of(c);

  // Serve the rest, twice around, forcing evictions and refills next to the holes.
  for (int pass = 0; pass < 2; ++pass) {
    for (ChunkId c : {0u, 1u, 6u, 7u, 8u, 10u, 11u, 12u, 13u, 14u, 15u}) ASSERT_EQ(rig.read_chunk(c), 0u) << c;
    rig.pager->enter(9);
    EXPECT_EQ(verify_pattern(base + 9 * kChunk, 9 * kChunk, kChunk / 2, kSeed).bad_words, 0u);
    rig.pager->leave(9);
  }
  const PagerStats st = rig.pager->stats();
  EXPECT_EQ(st.unmapped_chunks, 4u);
  EXPECT_GE(st.unmap_events, 2u);
  for (ChunkId c = 2; c <= 5; ++c) {
    EXPECT_EQ(rig.pager->fills_of(c), fills_before[c]) << "chunk " << c << " was filled after its unmap";
    EXPECT_FALSE(rig.pager->resident(c));
  }
  for (size_t i = 0; i < 2 * kChunk; ++i)
    ASSERT_EQ(static_cast<unsigned char*>(other)[i], 0xAB) << "byte " << i << " of the foreign mapping changed";
  EXPECT_LE(st.max_resident_chunks, 6u);
  rig.expect_books_match_kernel();
  rig.pager->shutdown();
  ::munmap(other, 2 * kChunk);
}

namespace {

// In a forked child: restore the default SIGSEGV action (sanitizers install handlers),
// touch `p`; the parent learns how the child ended.
int child_touch(const std::byte* p) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    struct sigaction sa {};
    sa.sa_handler = SIG_DFL;
    ::sigaction(SIGSEGV, &sa, nullptr);
    ::sigaction(SIGBUS, &sa, nullptr);
    const volatile uint64_t v = *reinterpret_cast<const volatile uint64_t*>(p);
    ::_exit(v == 0 ? 3 : 4);  // 3: read a zero page (the failure this guards against)
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

}  // namespace

// T7: shutdown with faults outstanding: threads blocked in faults are served by the
// drain; afterwards any access dies with SIGSEGV and never reads zeros.
TEST(TSuite, T7_ShutdownWithFaultsOutstanding) {
  SKIP_WITHOUT_UFFD();
  constexpr ChunkId kChunks = 8;
  Rig rig(kChunks * kChunk, kChunks, PolicyKind::Declared);
  rig.pager->pause(true);  // faults queue up unserved
  std::atomic<uint64_t> bad{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 6; ++t) {
    ts.emplace_back([&, t] {
      const ChunkId c = static_cast<ChunkId>(t % 4);  // two threads share chunks 0 and 1
      rig.pager->enter(c);
      const uint64_t off = c * kChunk + static_cast<uint64_t>(t) * kPage;
      bad += verify_pattern(rig.pager->base() + off, off, kPage, kSeed).bad_words;
      rig.pager->leave(c);
    });
  }
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (rig.pager->stats().faults_handled < 6 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(1ms);
  ASSERT_EQ(rig.pager->stats().faults_handled, 6u) << "threads did not block in faults";
  EXPECT_EQ(rig.pager->stats().demand_fills, 0u);
  rig.pager->shutdown([&] {
    for (auto& t : ts) t.join();
  });
  EXPECT_EQ(bad.load(), 0u);
  const PagerStats st = rig.pager->stats();
  EXPECT_EQ(st.demand_fills, 4u);
  EXPECT_EQ(st.spurious_faults, 2u);
  EXPECT_EQ(rig.pager->reconcile_now(), 0u) << rig.pager->first_mismatch();
  EXPECT_EQ(st.reconcile_mismatches, 0u);
  EXPECT_FALSE(rig.pager->failed()) << rig.pager->error();

  // A resident chunk and a never-filled chunk: both must fault after shutdown.
  for (ChunkId c : {0u, 6u}) {
    const int status = child_touch(rig.pager->base() + c * kChunk);
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV)
        << "chunk " << c << ": child " << (WIFEXITED(status) ? "exited " + std::to_string(WEXITSTATUS(status))
                                                              : "signal " + std::to_string(WTERMSIG(status)));
  }
}

// The watchdog: a fault that cannot be served (every resident chunk held) fails the pager
// with the evidence instead of hanging; once the holder leaves, the fault is served.
TEST(TSuite, Watchdog_NamesEvidenceInsteadOfHanging) {
  SKIP_WITHOUT_UFFD();
  Rig rig(4 * kChunk, 1, PolicyKind::Declared, SourceEngine::Direct, 0, 0.3);
  std::atomic<bool> failed_cb{false};
  rig.pager->set_failure_callback([&] { failed_cb = true; });
  rig.pager->enter(0);
  ASSERT_EQ(verify_pattern(rig.pager->base(), 0, kChunk, kSeed).bad_words, 0u);
  std::atomic<uint64_t> bad{~0ULL};
  std::thread blocked([&] { bad = rig.read_chunk(1); });
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!rig.pager->failed() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(5ms);
  ASSERT_TRUE(rig.pager->failed());
  EXPECT_TRUE(failed_cb.load());
  const std::string err = rig.pager->error();
  EXPECT_NE(err.find("watchdog"), std::string::npos) << err;
  EXPECT_NE(err.find("resident=[0]"), std::string::npos) << err;
  EXPECT_NE(err.find("consumers={0:1,1:1}"), std::string::npos) << err;
  rig.pager->leave(0);  // the holder lets go: the blocked fault is served after all
  blocked.join();
  EXPECT_EQ(bad.load(), 0u);
  EXPECT_EQ(rig.pager->stats().reconcile_mismatches, 0u);
  rig.pager->shutdown();
}

// Prefetch fills the next declared chunks without faults; the budget still holds.
TEST(TSuite, Prefetch_FillsAheadWithinBudget) {
  SKIP_WITHOUT_UFFD();
  constexpr ChunkId kChunks = 10;
  Rig rig(kChunks * kChunk, 4, PolicyKind::Prefetch, SourceEngine::Direct, 2);
  uint64_t hits_after_prefetch = 0;
  for (uint64_t s = 0; s < 3 * kChunks; ++s) {
    const ChunkId c = static_cast<ChunkId>(s % kChunks);
    // Give the pager time to act on the previous signal, as a compute phase would.
    const auto deadline = std::chrono::steady_clock::now() + 2s;
    while (s > 0 && !rig.pager->resident(c) && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(100us);
    ASSERT_EQ(rig.read_chunk(c), 0u);
    hits_after_prefetch += !rig.pager->demand_filled_in(c, s);
    rig.pager->step_boundary(s, s + 1);
  }
  const PagerStats st = rig.pager->stats();
  EXPECT_GT(st.prefetch_fills, 0u);
  EXPECT_GT(st.prefetch_used, 0u);
  EXPECT_GE(hits_after_prefetch, 2u * kChunks);
  EXPECT_LE(st.max_resident_chunks, 4u);
  rig.expect_books_match_kernel();
  rig.pager->shutdown();
}

namespace {

// A Source that can be told to hang inside a read, as storage that stopped answering.
class StallingSource final : public Source {
 public:
  StallingSource(std::unique_ptr<Source> inner, std::atomic<bool>& stall) : inner_(std::move(inner)), stall_(stall) {}
  SourceEngine engine() const override { return inner_->engine(); }
  uint64_t file_size() const override { return inner_->file_size(); }
  size_t window_count() const override { return inner_->window_count(); }
  size_t window_capacity() const override { return inner_->window_capacity(); }
  size_t window_bytes() const override { return inner_->window_bytes(); }
  uint32_t alignment() const override { return inner_->alignment(); }
  bool submit(const Extent& e, uint64_t tag) override {
    while (stall_.load()) std::this_thread::sleep_for(1ms);
    return inner_->submit(e, tag);
  }
  std::optional<Completion> reap(bool wait) override { return inner_->reap(wait); }
  void release(const Completion& c) override { inner_->release(c); }
  void drain() override { inner_->drain(); }
  int free_window() const override { return inner_->free_window(); }
  size_t windows_free() const override { return inner_->windows_free(); }
  size_t max_inflight() const override { return inner_->max_inflight(); }
  bool registered_buffers() const override { return inner_->registered_buffers(); }
  size_t inflight() const override { return inner_->inflight(); }
  void begin_bundle(uint32_t reads) override { inner_->begin_bundle(reads); }
  int completion_fd() override { return inner_->completion_fd(); }
  SourceStats stats() const override { return inner_->stats(); }

 private:
  std::unique_ptr<Source> inner_;
  std::atomic<bool>& stall_;
};

}  // namespace

// The watchdog also covers a fill stuck in storage (the pager thread cannot watch itself
// while it waits in a read): check_stall() from another thread fails the pager.
TEST(TSuite, Watchdog_StalledSource) {
  SKIP_WITHOUT_UFFD();
  test::TempDir dir;
  const std::string path = dir.file("region.bin");
  test::write_pattern_file(path, 4 * kChunk, kSeed);
  std::atomic<bool> stall{true};
  PagerConfig cfg;
  cfg.chunk_size = kChunk;
  cfg.budget_chunks = 4;
  cfg.eager_reconcile = true;
  cfg.watchdog_s = 0.2;
  cfg.huge = kHugeMode;
  Pager pager(std::make_unique<StallingSource>(open_source(SourceEngine::Direct, path, kChunk), stall),
              make_policy(PolicyKind::Declared, 4), cfg);
  pager.start();
  std::atomic<uint64_t> bad{~0ULL};
  std::thread reader([&] {
    pager.enter(2);
    bad = verify_pattern(pager.base() + 2 * kChunk, 2 * kChunk, kChunk, kSeed).bad_words;
    pager.leave(2);
  });
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!pager.failed() && std::chrono::steady_clock::now() < deadline) {
    pager.check_stall();
    std::this_thread::sleep_for(10ms);
  }
  ASSERT_TRUE(pager.failed());
  EXPECT_NE(pager.error().find("fill of chunk 2"), std::string::npos) << pager.error();
  EXPECT_NE(pager.error().find("consumers={2:1}"), std::string::npos) << pager.error();
  stall = false;  // storage answers again: the fill completes and the reader is served
  reader.join();
  EXPECT_EQ(bad.load(), 0u);
  EXPECT_EQ(pager.stats().reconcile_mismatches, 0u);
  pager.shutdown();
}

// A rejected read (the file shrank under the pager) fails the pager with the reason and
// is never published. The faulting thread stays blocked (never reads garbage or zeros) and
// is shown stranded, so this runs in a forked child that exits without joining it.
TEST(TSuite, RejectedReadFailsThePager) {
  SKIP_WITHOUT_UFFD();
  const pid_t pid = ::fork();
  if (pid == 0) {
    int code = 0;
    {
      Rig rig(8 * kChunk, 8, PolicyKind::Declared);
      if (::truncate(rig.path.c_str(), 4 * kChunk) != 0) ::_exit(10);
      if (rig.read_chunk(1) != 0) ::_exit(11);  // still inside the file: fine
      if (rig.pager->faults_stranded()) ::_exit(16);  // nothing failed, nothing waits
      std::thread([&] { rig.read_chunk(6); }).detach();
      const auto deadline = std::chrono::steady_clock::now() + 10s;
      while (!rig.pager->failed() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(5ms);
      // The thread blocked on chunk 6 is shown stranded (the drivers then leave at once).
      while (!rig.pager->faults_stranded() && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(5ms);
      if (!rig.pager->failed()) code = 12;
      else if (rig.pager->error().find("short read") == std::string::npos) code = 13;
      else if (rig.pager->resident(6)) code = 14;
      else if (rig.pager->stats().reconcile_mismatches != 0) code = 15;
      else if (!rig.pager->faults_stranded()) code = 17;
      std::fprintf(stderr, "child: %s\n", rig.pager->error().c_str());
      std::error_code ec;
      std::filesystem::remove_all(rig.dir.path(), ec);  // _exit skips destructors
      ::_exit(code);
    }
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status)) << "child died with signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

// Oversize steps: a step whose chunks exceed the budget runs without consumers; the pager
// pins, per faulting thread, its last two chunks. Two threads each walk their half of the
// step forward, alternating between two neighbouring chunks the way a matrix-product tile
// straddling a chunk boundary does: every byte is exact, no chunk is refilled within the
// step (the pins hold each thread's pair), the budget holds, and the pins go at the step
// change. At the hard minimum of the progress argument (2 pins x 2 threads + 1) it finishes.
TEST(TSuite, Oversize_PerThreadPinsWalkAStepLargerThanTheBudget) {
  SKIP_WITHOUT_UFFD();
  constexpr uint32_t kChunks = 24;
  for (uint64_t budget : {6u, 5u}) {
    test::TempDir dir;
    const std::string path = dir.file("region.bin");
    test::write_pattern_file(path, kChunks * kChunk, kSeed);
    std::vector<ChunkId> all(kChunks);
    for (ChunkId c = 0; c < kChunks; ++c) all[c] = c;
    PagerConfig cfg;
    cfg.chunk_size = kChunk;
    cfg.budget_chunks = budget;
    cfg.eager_reconcile = true;
    cfg.watchdog_s = 20;
    cfg.step_chunks = {all, {0}};
    cfg.max_pins = 2;
    cfg.huge = kHugeMode;
    Trace trace(4096);
    Pager pager(open_source(SourceEngine::Direct, path, kChunk),
                make_policy(PolicyKind::Declared, kChunks, DeclaredSequence{cfg.step_chunks}), cfg, &trace);
    pager.start();
    pager.step_boundary(std::nullopt, 0, true);
    std::atomic<uint64_t> bad{0};
    auto walk = [&](ChunkId from, ChunkId to) {
      for (ChunkId c = from; c + 1 < to; ++c)
        for (int k = 0; k < 8; ++k)
          for (ChunkId x : {c, static_cast<ChunkId>(c + 1)}) {
            const uint64_t off = x * kChunk + static_cast<uint64_t>(k) * kPage;
            bad += verify_pattern(pager.base() + off, off, kPage, kSeed).bad_words;
          }
    };
    std::thread a(walk, 0, kChunks / 2), b(walk, kChunks / 2, kChunks);
    a.join();
    b.join();
    EXPECT_EQ(bad.load(), 0u);
    const PagerStats st = pager.stats();
    EXPECT_FALSE(pager.failed()) << pager.error();
    EXPECT_EQ(st.oversize_steps, 1u);
    EXPECT_EQ(st.in_step_refills, 0u) << "budget " << budget;
    EXPECT_EQ(st.demand_fills, kChunks);
    EXPECT_LE(st.max_resident_chunks, budget);
    EXPECT_LE(st.max_pins, 4u);
    EXPECT_FALSE(pager.pinned_set().empty());
    pager.step_boundary(0, 1, false);  // the step is consumed: the pins go
    EXPECT_TRUE(pager.pinned_set().empty());
    EXPECT_EQ(pager.reconcile_now(), 0u) << pager.first_mismatch();
    EXPECT_EQ(st.reconcile_mismatches, 0u) << pager.first_mismatch();
    pager.shutdown();
  }
}

// Huge chunks (2 MiB chunks): `move` publishes whole chunks with UFFDIO_MOVE from the window
// (the tail chunk, shorter, is copied), `collapse` copies then MADV_COLLAPSEs. Either way the
// bytes are exact, the books agree with mincore after every fill and eviction (a huge page
// is present or absent as a whole), an eviction frees the whole chunk (no huge page of the
// region survives beyond the resident chunks) and the budget holds.
class TSuiteHuge : public ::testing::TestWithParam<HugeChunks> {};

TEST_P(TSuiteHuge, HugeChunksAreExactAccountedAndEvictedWhole) {
  SKIP_WITHOUT_UFFD();
  constexpr uint64_t kHuge = 2u << 20;
  constexpr uint32_t kChunks = 7;
  constexpr uint64_t kBudget = 3;
  const uint64_t bytes = (kChunks - 1) * kHuge + 5 * kPage;  // a short tail chunk
  for (SourceEngine engine : {SourceEngine::Direct, SourceEngine::Buffered}) {
    test::TempDir dir;
    const std::string path = dir.file("region.bin");
    test::write_pattern_file(path, bytes, kSeed);
    PagerConfig cfg;
    cfg.chunk_size = kHuge;
    cfg.budget_chunks = kBudget;
    cfg.eager_reconcile = true;
    cfg.watchdog_s = 20;
    cfg.huge = GetParam();
    Trace trace(4096);
    std::unique_ptr<Pager> pager;
    try {
      pager = std::make_unique<Pager>(open_source(engine, path, kHuge), make_policy(PolicyKind::Lru, kChunks), cfg,
                                      &trace);
    } catch (const InputError& e) {
      GTEST_SKIP() << e.what();
    }
    pager->start();
    uint64_t bad = 0, max_huge = 0;
    for (int pass = 0; pass < 3; ++pass)
      for (ChunkId c = 0; c < kChunks; ++c) {
        pager->enter(c);
        const uint64_t off = c * kHuge;
        bad += verify_pattern(pager->base() + off, off, pager->chunk_length(c), kSeed).bad_words;
        pager->leave(c);
        const auto hb = pager->region_huge_bytes();
        ASSERT_TRUE(hb.has_value());
        max_huge = std::max(max_huge, *hb);
        EXPECT_LE(*hb, pager->stats().resident_chunks * kHuge) << "a huge page outlived its chunk";
        EXPECT_EQ(pager->reconcile_now(), 0u) << pager->first_mismatch();
      }
    EXPECT_EQ(bad, 0u) << to_string(engine);
    const PagerStats st = pager->stats();
    EXPECT_FALSE(pager->failed()) << pager->error();
    EXPECT_EQ(st.demand_fills, 3u * kChunks);  // LRU on a cyclic scan: every access misses
    EXPECT_LE(st.max_resident_chunks, kBudget);
    EXPECT_LE(st.max_present_pages, kBudget * kHuge / kPage);
    EXPECT_GT(st.reconcile_checks, 0u);
    EXPECT_EQ(st.reconcile_mismatches, 0u) << pager->first_mismatch();
    const uint64_t whole_fills = 3u * (kChunks - 1);  // the tail chunk is never whole
    if (GetParam() == HugeChunks::Move) {
      EXPECT_EQ(st.move_fills + st.move_fallbacks, whole_fills) << to_string(engine);
      EXPECT_GT(st.move_fills, 0u) << "UFFDIO_MOVE never succeeded (first errno " << st.move_first_errno << ")";
      // Every eviction of a chunk that came in by a whole move gives its huge page back to the
      // one window, which a move emptied and no read refilled before the eviction: no refusal.
      EXPECT_GT(st.move_recycles, 0u) << "no eviction was recycled (first errno " << st.recycle_first_errno << ")";
      EXPECT_EQ(st.recycle_misses, 0u) << "first errno " << st.recycle_first_errno;
      EXPECT_LE(st.move_recycles, st.evictions);
    } else {
      EXPECT_EQ(st.move_recycles, 0u);
      EXPECT_EQ(st.collapses + st.collapse_failures, whole_fills) << to_string(engine);
      EXPECT_GT(st.collapses, 0u) << "MADV_COLLAPSE never succeeded (first errno " << st.collapse_first_errno << ")";
    }
    // Evidence that the chunks really were huge pages (when the kernel had any to give).
    std::printf("%s/%s: region huge bytes at most %llu\n", to_string(GetParam()), to_string(engine),
                static_cast<unsigned long long>(max_huge));
    pager->shutdown();
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, TSuiteHuge, ::testing::Values(HugeChunks::Move, HugeChunks::Collapse),
                         [](const ::testing::TestParamInfo<HugeChunks>& p) { return std::string(to_string(p.param)); });

// ---- the Plan inside the pager ------------------------------------------------------------

// Negative control: the pager's rule "never evict a chunk with a live consumer" is the
// Plan's invariant. Asked to recycle (evict) a chunk a consumer holds, or one a compute
// thread has pinned in an oversize step, the Plan refuses (consumers-live) and the chunk
// stays resident, untouched; once the consumer left, the same request recycles it.
TEST(TSuite, Plan_RefusesToRecycleAChunkWithALiveConsumer) {
  SKIP_WITHOUT_UFFD();
  constexpr ChunkId kChunks = 8;
  Rig rig(kChunks * kChunk, kChunks, PolicyKind::Declared);
  Pager& p = *rig.pager;
  p.enter(3);
  ASSERT_EQ(verify_pattern(p.base() + 3 * kChunk, 3 * kChunk, kChunk, kSeed).bad_words, 0u);
  ASSERT_TRUE(p.resident(3));
  EXPECT_EQ(p.plan().slot_phase(3), SlotPhase::InUse);
  EXPECT_EQ(p.plan().slot_consumers(3), 1u);
  const uint64_t gen = p.plan().slot_generation(3);
  EXPECT_EQ(p.try_recycle(3), PlanError::ConsumersLive);
  EXPECT_TRUE(p.resident(3));
  EXPECT_EQ(p.plan().slot_phase(3), SlotPhase::InUse);
  EXPECT_EQ(p.plan().slot_generation(3), gen);
  EXPECT_EQ(verify_pattern(p.base() + 3 * kChunk, 3 * kChunk, kChunk, kSeed).bad_words, 0u);
  EXPECT_EQ(p.fills_of(3), 1u);  // never refilled: it was never discarded
  p.leave(3);
  EXPECT_EQ(p.plan().slot_phase(3), SlotPhase::Recyclable);
  EXPECT_EQ(p.try_recycle(3), PlanError::None);
  EXPECT_FALSE(p.resident(3));
  EXPECT_EQ(p.plan().slot_phase(3), SlotPhase::Vacant);
  // A pin (oversize step: no consumers, the faulting thread pins its chunk) is a consumer too.
  p.step_boundary(std::nullopt, 1, true);
  std::thread([&] { EXPECT_EQ(verify_pattern(p.base() + 5 * kChunk, 5 * kChunk, kPage, kSeed).bad_words, 0u); }).join();
  ASSERT_EQ(p.pinned_set(), std::vector<ChunkId>{5});
  EXPECT_EQ(p.try_recycle(5), PlanError::ConsumersLive);
  EXPECT_TRUE(p.resident(5));
  p.step_boundary(1, 2, false);  // the pins go
  EXPECT_EQ(p.try_recycle(5), PlanError::None);
  const PagerStats st = p.stats();
  EXPECT_EQ(st.plan_recycle_refusals, 2u);
  EXPECT_EQ(p.plan().counters().recycle_refusals, 2u);
  EXPECT_EQ(p.plan().counters().errors[static_cast<size_t>(PlanError::ConsumersLive)], 2u);
  rig.expect_books_match_kernel();
  p.shutdown();
  ASSERT_TRUE(p.plan_shutdown().has_value());
  EXPECT_EQ(*p.plan_shutdown(), PlanError::None);
}

namespace {

// Object steps of three chunks each: {0,1,2}, {3,4,5}, ...
std::vector<std::vector<ChunkId>> triples(ChunkId chunks) {
  std::vector<std::vector<ChunkId>> s;
  for (ChunkId c = 0; c < chunks; c += 3) {
    s.push_back({});
    for (ChunkId k = c; k < std::min<ChunkId>(c + 3, chunks); ++k) s.back().push_back(k);
  }
  return s;
}

// What a UringRig varies.
struct UringRigOptions {
  uint32_t windows = 4;      // Direct: one, and no read-ahead (D)
  uint32_t steps_ahead = 0;  // PagerConfig::readahead_steps_ahead
  SourceEngine engine = SourceEngine::Uring;
  std::vector<std::vector<ChunkId>> steps;      // object steps (empty: triples)
  std::vector<std::vector<ChunkId>> readahead;  // PagerConfig::readahead_steps
};

// F's pager: the declared policy over steps of three chunks, eight chunks of budget, the
// uring source with four windows, read-ahead on, eager reconcile.
struct UringRig {
  test::TempDir dir;
  std::string path = dir.file("region.bin");
  PagerConfig cfg;
  Trace trace{1 << 14};
  std::unique_ptr<Pager> pager;
  std::shared_ptr<const FaultReport> fault;
  explicit UringRig(ChunkId chunks, FaultSpec spec = {}, std::optional<uint64_t> reset_at_read = {},
                    UringRigOptions o = {}) {
    test::write_pattern_file(path, chunks * kChunk, kSeed);
    cfg.reset_at_read = reset_at_read;
    cfg.chunk_size = kChunk;
    cfg.budget_chunks = 8;
    cfg.eager_reconcile = true;
    cfg.watchdog_s = 20;
    cfg.step_chunks = o.steps.empty() ? triples(chunks) : std::move(o.steps);
    cfg.readahead = o.engine == SourceEngine::Uring;
    cfg.readahead_steps = std::move(o.readahead);
    cfg.readahead_steps_ahead = o.steps_ahead;
    cfg.huge = kHugeMode;
    SourceOptions so;
    so.windows = o.engine == SourceEngine::Uring ? o.windows : 1;
    so.depth = so.windows;
    FaultySourceHandle fs = with_fault(open_source(o.engine, path, kChunk, so), spec);
    fault = fs.report;
    pager = std::make_unique<Pager>(std::move(fs.source),
                                    make_policy(PolicyKind::Declared, chunks, DeclaredSequence{cfg.step_chunks}), cfg, &trace);
  }

  // `steps` object steps as generate runs them (the new step's chunks entered before the old
  // ones are let go), `between(g)` before step g's signal; returns the wrong words read.
  uint64_t run_steps(uint64_t steps, const std::function<void(uint64_t)>& between = {}) {
    const uint64_t S = cfg.step_chunks.size();
    pager->set_step(0);
    pager->set_readahead_horizon(steps - 1);
    pager->start();
    uint64_t bad = 0;
    for (uint64_t g = 0; g < steps; ++g) {
      const auto& cs = cfg.step_chunks[g % S];
      for (ChunkId c : cs) pager->enter(c);
      if (between) between(g);
      if (g > 0) pager->step_boundary(g - 1, g);
      for (ChunkId c : cs) bad += verify_pattern(pager->base() + c * kChunk, c * kChunk, kChunk, kSeed).bad_words;
      if (g > 0)
        for (ChunkId c : cfg.step_chunks[(g - 1) % S]) pager->leave(c);
    }
    for (ChunkId c : cfg.step_chunks[(steps - 1) % S]) pager->leave(c);
    pager->step_boundary(steps - 1, steps);
    return bad;
  }
};

}  // namespace

// F: the uring source reads step s+1's chunks ahead while step s runs, as one bundle that
// waits in its windows and is published when step s+1 begins. Every byte is exact, the
// budget holds, and at the close every window is FREE and no ticket is outstanding.
TEST(TSuite, Uring_ReadAheadBundlesAreExactAndCloseBalanced) {
  SKIP_WITHOUT_UFFD();
  constexpr ChunkId kChunks = 24;
  UringRig rig(kChunks);
  auto& pager = rig.pager;
  const PagerConfig& cfg = rig.cfg;
  const uint64_t steps = 3 * cfg.step_chunks.size();
  EXPECT_EQ(rig.run_steps(steps), 0u);
  const PagerStats st = pager->stats();
  EXPECT_FALSE(pager->failed()) << pager->error();
  EXPECT_GT(st.readahead_bundles, 0u);
  EXPECT_GT(st.readahead_fills, 0u);
  EXPECT_LE(st.max_resident_chunks, 8u);
  EXPECT_EQ(st.reconcile_mismatches, 0u) << pager->first_mismatch();
  EXPECT_EQ(pager->reconcile_now(), 0u) << pager->first_mismatch();
  pager->shutdown();
  const SourceReport r = pager->source_report();
  EXPECT_EQ(r.engine, SourceEngine::Uring);
  EXPECT_EQ(r.windows, 4u);
  EXPECT_EQ(r.stats.reads, r.stats.completions);
  EXPECT_EQ(r.stats.reads, st.demand_fills + st.prefetch_fills);
  EXPECT_GE(r.stats.peak_inflight, 1u);
  EXPECT_LE(r.stats.peak_inflight, 4u);
  EXPECT_EQ(r.windows_free_at_close, 4u);
  EXPECT_EQ(r.plan_windows_free_at_close, 4u);
  EXPECT_EQ(r.tickets_outstanding_at_close, 0u);
  EXPECT_EQ(r.cancellations, 0u);
  EXPECT_EQ(r.stats.rejections, 0u);
  ASSERT_TRUE(pager->plan_shutdown().has_value());
  EXPECT_EQ(*pager->plan_shutdown(), PlanError::None);
  const PlanCounters pc = pager->plan().counters();
  EXPECT_EQ(pc.reconcile_violations, 0u) << pager->plan().first_violation();
  EXPECT_GT(pc.reconcile_checks, 0u);
  EXPECT_EQ(pc.tickets_issued, pc.tickets_retired);
  EXPECT_EQ(pc.consumer_acquires, pc.consumer_releases);
  EXPECT_TRUE(pager->plan().balance().balanced());
}

// F's read-ahead reaches as far as its free windows go (seven of eight: over two steps
// ahead), or one step with --readahead-steps 1, and either way changes when chunks are read,
// never which: the fills (by step and chunk, demand or read-ahead) and the evictions are D's,
// run by the direct source at the same budget. Neighbouring steps share a chunk, as layers
// that share a 2 MiB chunk do, and every fourth step is read on demand, as embd is: step t's
// read-ahead must leave a chunk it shares with such a step to that step.
TEST(TSuite, Uring_ReadAheadReachesSeveralStepsAndKeepsDsFillsAndEvictions) {
  SKIP_WITHOUT_UFFD();
  constexpr ChunkId kChunks = 30;
  auto books = [](const Trace& t) {
    std::vector<std::tuple<uint32_t, uint32_t, bool>> v;  // (step, chunk, eviction)
    for (const TraceRecord& r : t.sorted()) {
      const auto k = static_cast<TraceKind>(r.kind);
      if (k == TraceKind::DemandFill || k == TraceKind::PrefetchFill || k == TraceKind::Eviction)
        v.emplace_back(r.step, r.chunk, k == TraceKind::Eviction);
    }
    std::sort(v.begin(), v.end());
    return v;
  };
  UringRigOptions o;
  for (ChunkId c = 0; c + 2 < kChunks; c += 2) o.steps.push_back({c, c + 1, c + 2});  // {0,1,2}, {2,3,4}, ...
  o.readahead = o.steps;
  for (size_t i = 0; i < o.readahead.size(); i += 4) o.readahead[i].clear();  // read on demand, as embd is
  UringRigOptions od = o;
  od.windows = 1;
  od.engine = SourceEngine::Direct;
  UringRig d(kChunks, {}, {}, od);
  const uint64_t steps = 3 * d.cfg.step_chunks.size();
  ASSERT_EQ(d.run_steps(steps), 0u);
  d.pager->shutdown();
  ASSERT_FALSE(d.pager->failed()) << d.pager->error();
  const auto want = books(d.trace);
  ASSERT_GT(d.pager->stats().evictions, 0u) << "the budget must make D evict";
  for (uint32_t ahead : {0u, 1u}) {
    o.windows = 8;
    o.steps_ahead = ahead;
    UringRig f(kChunks, {}, {}, o);
    ASSERT_EQ(f.run_steps(steps), 0u) << ahead;
    const PagerStats st = f.pager->stats();
    f.pager->shutdown();
    ASSERT_FALSE(f.pager->failed()) << f.pager->error();
    EXPECT_GT(st.readahead_fills, 0u) << ahead;
    if (ahead == 0) {
      EXPECT_GE(st.readahead_max_ahead, 2u);
    } else {
      EXPECT_EQ(st.readahead_max_ahead, 1u);
    }
    EXPECT_EQ(books(f.trace), want) << "read-ahead " << ahead << " step(s) changed which chunks are read or evicted";
    EXPECT_EQ(f.pager->source_report().windows_free_at_close, 8u);
    EXPECT_TRUE(f.pager->plan().balance().balanced());
  }
}

// A rejected read inside a read-ahead bundle publishes nothing of the bundle: the last read
// of the first bundle fails (-EIO) after the others were submitted; the pager fails closed,
// none of the bundle's chunks becomes resident (in the books or in the kernel), and the
// Plan retires every ticket.
TEST(TSuite, Uring_RejectedReadInsideABundlePublishesNothing) {
  SKIP_WITHOUT_UFFD();
  UringRig rig(12, FaultSpec{FaultCell::BundleExtentFailure, 0});
  Pager& pager = *rig.pager;
  const Trace& trace = rig.trace;
  pager.set_step(0);  // entering step 0 reads step 1's chunks {3, 4, 5} ahead
  pager.start();
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!pager.failed() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(2ms);
  ASSERT_TRUE(pager.failed());
  const std::string err = pager.error();
  EXPECT_NE(err.find("rejected read-failed completion for chunk 5"), std::string::npos) << err;
  EXPECT_NE(err.find("nothing of its bundle (3 chunk(s): 3 4 5) was published"), std::string::npos) << err;
  ASSERT_TRUE(rig.fault);
  EXPECT_TRUE(rig.fault->fired);
  EXPECT_EQ(rig.fault->read, 2u);
  const PagerRejectionReport f = pager.rejection_report();
  EXPECT_TRUE(f.any);
  EXPECT_EQ(f.bundle, (std::vector<ChunkId>{3, 4, 5}));
  EXPECT_EQ(f.bundle_chunks_published, 0u);
  EXPECT_EQ(f.kind, PlanError::ReadFailed);
  pager.shutdown();
  for (ChunkId c : {3u, 4u, 5u}) EXPECT_FALSE(pager.resident(c)) << c;
  std::vector<unsigned char> v(3 * kChunk / kPage);
  ASSERT_EQ(::mincore(const_cast<std::byte*>(pager.base()) + 3 * kChunk, 3 * kChunk, v.data()), 0);
  for (unsigned char b : v) EXPECT_EQ(b & 1, 0) << "a page of the failed bundle is in the region";
  for (const auto& r : trace.sorted()) EXPECT_NE(r.kind, static_cast<uint8_t>(TraceKind::PrefetchFill)) << r.chunk;
  const PlanCounters pc = pager.plan().counters();
  EXPECT_EQ(pc.bundles_published, 0u);
  EXPECT_EQ(pc.objects_published, 0u);
  EXPECT_EQ(pc.bundles_failed, 1u);
  EXPECT_EQ(pc.tickets_issued, pc.tickets_retired);
  const SourceReport r = pager.source_report();
  EXPECT_EQ(r.stats.reads, r.stats.completions);
  EXPECT_EQ(r.windows_free_at_close, 4u);
  EXPECT_EQ(r.tickets_outstanding_at_close, 0u);
}

// VmLck of this process (/proc/self/status), bytes.
static uint64_t vm_locked_bytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmLck:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
  return 0;
}

// Reclaim authority: with protect, every resident chunk is mlocked (the kernel cannot reclaim
// or swap it) and the pager's own evictions still free it (MADV_DONTNEED_LOCKED): the locked
// bytes follow the resident set, never more, and the bytes stay exact. The rest of the
// process is locked on fault too (a fresh mapping's touched pages count), and the pager's
// end unlocks it.
TEST(TSuite, Protect_ResidentChunksAreLockedAndEvictionsStillFreeThem) {
  SKIP_WITHOUT_UFFD();
  if (kHugeMode == HugeChunks::Move) GTEST_SKIP() << "UFFDIO_MOVE cannot move into an mlocked region: --protect runs with huge chunks off or collapse";
  constexpr ChunkId kChunks = 12;
  {
    Rig rig(kChunks * kChunk, 4, PolicyKind::Lru, SourceEngine::Direct, 0, 20, /*protect=*/true);
    uint64_t bad = 0, most_locked = 0;
    for (int pass = 0; pass < 2; ++pass)
      for (ChunkId c = 0; c < kChunks; ++c) {
        bad += rig.read_chunk(c);
        const auto locked = rig.pager->region_locked_bytes();
        ASSERT_TRUE(locked.has_value());
        const uint64_t resident = rig.pager->stats().resident_chunks * kChunk;
        EXPECT_EQ(*locked, resident) << "after chunk " << c << " of pass " << pass;
        most_locked = std::max(most_locked, *locked);
      }
    EXPECT_EQ(bad, 0u);
    EXPECT_EQ(most_locked, 4 * kChunk);
    EXPECT_GE(rig.pager->stats().evictions, 2 * kChunks - 4);
    rig.expect_books_match_kernel();
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)  // sanitizers make mlockall a no-op
    constexpr size_t kOther = 1 << 20;
    const uint64_t before = vm_locked_bytes();
    void* other = ::mmap(nullptr, kOther, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(other, MAP_FAILED);
    std::memset(other, 1, kOther);
    EXPECT_GE(vm_locked_bytes(), before + kOther) << "memory outside the region is locked on fault too";
    ::munmap(other, kOther);
#endif
    rig.pager->shutdown();
  }
  EXPECT_EQ(vm_locked_bytes(), 0u) << "the pager's end unlocks the process";
}

// Plan resets through the pager (generate's reset-outstanding cell and --warm-request): one
// by the pager thread once read 2 was submitted with reads in flight, one asked by the
// driver between steps. Reads of the old epoch come back StaleEpoch and are retired, never
// copied or published; their chunks are read again in the new epoch, every byte exact; at
// the end a shutdown under a held chunk is refused (consumers-live) and the real one is ok.
TEST(TSuite, Uring_ResetsWithReadsInFlightRereadExactly) {
  SKIP_WITHOUT_UFFD();
  constexpr ChunkId kChunks = 24;
  UringRig rig(kChunks, {}, 2);
  auto& pager = rig.pager;
  PlanResult<uint32_t> asked{PlanError::InvalidTransition, 0};
  const uint64_t steps = 3 * rig.cfg.step_chunks.size();
  EXPECT_EQ(rig.run_steps(steps, [&](uint64_t g) { if (g == steps / 2) asked = pager->reset(); }), 0u);
  EXPECT_EQ(asked.error, PlanError::None);
  pager->enter(0);
  EXPECT_EQ(pager->try_plan_shutdown(), PlanError::ConsumersLive);
  pager->leave(0);
  const PagerStats st = pager->stats();
  EXPECT_FALSE(pager->failed()) << pager->error();
  EXPECT_TRUE(st.reset.cell_fired);
  EXPECT_GE(st.reset.cell_read, 2u);
  EXPECT_GE(st.reset.cell_outstanding, 2u);
  EXPECT_EQ(st.reset.resets, 2u);
  EXPECT_EQ(st.reset.stale_published, 0u);
  EXPECT_EQ(st.reconcile_mismatches, 0u) << pager->first_mismatch();
  pager->shutdown();
  ASSERT_TRUE(pager->plan_shutdown().has_value());
  EXPECT_EQ(*pager->plan_shutdown(), PlanError::None);
  const PlanCounters pc = pager->plan().counters();
  EXPECT_EQ(pc.resets, 2u);
  EXPECT_GE(pc.tickets_invalidated, 1u);
  EXPECT_EQ(pc.tickets_issued, pc.tickets_copied + pc.tickets_invalidated);
  EXPECT_EQ(pc.shutdown_refusals, 1u);
  EXPECT_EQ(pc.reconcile_violations, 0u) << pager->plan().first_violation();
  EXPECT_TRUE(pager->plan().balance().balanced());
  EXPECT_EQ(pager->source_report().tickets_outstanding_at_close, 0u);
}
