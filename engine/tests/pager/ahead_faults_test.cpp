// Faults ahead of the cursor (pager.hpp, PagerConfig::defer_ahead_faults): a driver thread
// that runs ahead of the others has its demand fault decided at the cursor of its own
// step, as in lockstep, not at whatever cursor the slowest thread leaves. Scripted with
// two threads on the real Pager: the test thread is the slow driver, a second one the fast.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "adapters/synthetic/pattern.hpp"
#include "pager/pager.hpp"
#include "policy/declared.hpp"
#include "source/source.hpp"
#include "util/test_util.hpp"

using namespace resid;
using namespace std::chrono_literals;

namespace {

constexpr uint64_t kChunk = 64 << 10, kSeed = 5;
constexpr uint32_t kChunks = 8, kBudget = 4;

struct Scan {
  test::TempDir dir;
  std::string path = dir.file("region.bin");
  std::unique_ptr<Pager> pager;

  explicit Scan(bool defer, double watchdog_s = 20) {
    test::write_pattern_file(path, kChunks * kChunk, kSeed);
    PagerConfig cfg;
    cfg.chunk_size = kChunk;
    cfg.budget_chunks = kBudget;
    cfg.eager_reconcile = true;
    cfg.watchdog_s = watchdog_s;
    cfg.defer_ahead_faults = defer;
    pager = std::make_unique<Pager>(open_source(SourceEngine::Buffered, path, kChunk),
                                    make_policy(PolicyKind::Declared, kChunks), cfg);
    pager->set_step(0);
    pager->start();
  }
  // Read chunk c (step c of the first pass) as a consumer; returns the wrong words.
  uint64_t read(ChunkId c) {
    pager->enter(c);
    const uint64_t bad = verify_pattern(pager->base() + c * kChunk, c * kChunk, kChunk, kSeed).bad_words;
    pager->leave(c);
    return bad;
  }
  // Steps 0..3 in lockstep (every driver done with each): chunks 0..3 fill the budget.
  void first_steps() {
    for (ChunkId s = 0; s < 4; ++s) {
      ASSERT_EQ(read(s), 0u);
      pager->step_boundary(s, s + 1);
    }
  }
  void wait_for(const std::function<bool()>& done) {
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (!done() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(1ms);
    ASSERT_TRUE(done()) << "condition not reached";
  }
};

// Step 4: the slow driver holds chunk 4 while the fast one, done with step 4, faults on
// chunk 5. Returns the resident set once both are through step 5.
std::vector<ChunkId> slow_and_fast(Scan& s) {
  s.first_steps();
  s.pager->enter(4);  // the slow driver, in step 4 (its fault evicts 3, the farthest)
  EXPECT_EQ(verify_pattern(s.pager->base() + 4 * kChunk, 4 * kChunk, kChunk, kSeed).bad_words, 0u);
  std::atomic<uint64_t> bad{~0ULL};
  std::atomic<bool> through{false};
  std::thread fast([&] {
    bad = s.read(5);
    through = true;
  });
  s.wait_for([&] { return through.load() || s.pager->stats().deferred_faults > 0; });
  // Not decided yet when deferred: the fault waits for step 4's signal.
  if (!through) {
    EXPECT_EQ(s.pager->stats().demand_fills, 5u);
  }
  s.pager->leave(4);
  s.pager->step_boundary(4, 5);  // every driver finished step 4
  fast.join();
  EXPECT_EQ(bad.load(), 0u);
  s.pager->step_boundary(5, 6);
  auto set = s.pager->resident_set();
  EXPECT_EQ(s.pager->reconcile_now(), 0u) << s.pager->first_mismatch();
  EXPECT_FALSE(s.pager->failed()) << s.pager->error();
  s.pager->shutdown();
  return set;
}

}  // namespace

// What lockstep decides: at step 5 (cursor 4, nothing held) the farthest next use is chunk 4.
TEST(AheadFaults, LockstepReference) {
  if (auto why = test::uffd_unavailable()) GTEST_SKIP() << *why;
  Scan s(true);
  s.first_steps();
  for (ChunkId c : {4u, 5u}) {
    ASSERT_EQ(s.read(c), 0u);
    s.pager->step_boundary(c, c + 1);
  }
  EXPECT_EQ(s.pager->resident_set(), (std::vector<ChunkId>{0, 1, 2, 5}));
  EXPECT_EQ(s.pager->stats().deferred_faults, 0u);  // in lockstep no fault is ahead
  s.pager->shutdown();
}

// The fast driver's fault waits for step 4's signal and then evicts what lockstep evicts.
TEST(AheadFaults, DecidedAtTheCursorOfTheirOwnStep) {
  if (auto why = test::uffd_unavailable()) GTEST_SKIP() << *why;
  Scan s(true);
  EXPECT_EQ(slow_and_fast(s), (std::vector<ChunkId>{0, 1, 2, 5}));
  EXPECT_EQ(s.pager->stats().deferred_faults, 1u);
}

// Negative control (the behaviour before): decided at once, at the slow driver's cursor 3,
// with chunk 4 held, the farthest evictable is kept chunk 2: a decision lockstep never makes.
TEST(AheadFaults, WithoutDeferralTheLaggingCursorChoosesTheVictim) {
  if (auto why = test::uffd_unavailable()) GTEST_SKIP() << *why;
  Scan s(false);
  EXPECT_EQ(slow_and_fast(s), (std::vector<ChunkId>{0, 1, 4, 5}));
  EXPECT_EQ(s.pager->stats().deferred_faults, 0u);
}

// A walk that stops signals nothing more: release_ahead_faults decides the deferred fault.
TEST(AheadFaults, ReleasedWhenNoSignalWillCome) {
  if (auto why = test::uffd_unavailable()) GTEST_SKIP() << *why;
  Scan s(true);
  s.first_steps();
  std::atomic<uint64_t> bad{~0ULL};
  std::thread fast([&] { bad = s.read(6); });  // step 6, two steps ahead of the cursor
  s.wait_for([&] { return s.pager->stats().deferred_faults > 0; });
  s.pager->release_ahead_faults();
  fast.join();
  EXPECT_EQ(bad.load(), 0u);
  EXPECT_FALSE(s.pager->failed()) << s.pager->error();
  s.pager->shutdown();
}

// A signal that never comes is named by the watchdog, not a hang.
TEST(AheadFaults, WatchdogNamesTheMissingSignal) {
  if (auto why = test::uffd_unavailable()) GTEST_SKIP() << *why;
  Scan s(true, 0.3);
  s.first_steps();
  std::thread fast([&] { s.read(6); });
  s.wait_for([&] { return s.pager->failed(); });
  EXPECT_NE(s.pager->error().find("is for step 6 and waits for the consumption signal of step 5"), std::string::npos)
      << s.pager->error();
  s.pager->release_ahead_faults();  // let the thread finish (the pager still serves)
  fast.join();
  s.pager->shutdown();
}
