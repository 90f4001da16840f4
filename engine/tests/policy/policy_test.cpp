// Policy engines as pure logic: no kernel, no pager. The cache simulation below drives a
// policy the way the pager does (on_access at access and fill, signal after each step,
// victims only when the budget is full) over the declared cyclic scan.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <stdexcept>
#include <vector>

#include "policy/declared.hpp"

using namespace resid;

namespace {

std::vector<ChunkId> cyclic(uint32_t n, uint32_t passes) {
  std::vector<ChunkId> v;
  for (uint32_t p = 0; p < passes; ++p)
    for (uint32_t c = 0; c < n; ++c) v.push_back(c);
  return v;
}

// Misses of `policy` on `refs` with capacity k, signal after each step (exact signal).
uint64_t simulate(Policy& policy, const std::vector<ChunkId>& refs, size_t k,
                  std::vector<bool>* miss_at = nullptr) {
  std::vector<ChunkId> resident;
  uint64_t misses = 0;
  for (size_t s = 0; s < refs.size(); ++s) {
    const ChunkId c = refs[s];
    policy.on_access(c);
    const bool hit = std::find(resident.begin(), resident.end(), c) != resident.end();
    if (!hit) {
      ++misses;
      if (resident.size() == k) {
        auto v = policy.choose_victim(resident, [&](ChunkId x) { return x != c; });
        EXPECT_TRUE(v.has_value());
        resident.erase(std::find(resident.begin(), resident.end(), *v));
      }
      resident.push_back(c);
      policy.on_access(c);
    }
    if (miss_at) miss_at->push_back(!hit);
    policy.on_signal(s);
  }
  return misses;
}

// Belady's OPT by brute force: on a miss with a full cache, try every possible victim and
// keep the minimum total misses over the rest of the trace. Exhaustive over all choices,
// memoized on (position, cache contents as a bitmask) so small cases finish instantly.
uint64_t belady_brute(const std::vector<ChunkId>& refs, size_t k, size_t pos, uint32_t cache,
                      std::map<std::pair<size_t, uint32_t>, uint64_t>& memo) {
  if (pos == refs.size()) return 0;
  const auto key = std::make_pair(pos, cache);
  if (auto it = memo.find(key); it != memo.end()) return it->second;
  const uint32_t bit = 1u << refs[pos];
  uint64_t best;
  if (cache & bit) {
    best = belady_brute(refs, k, pos + 1, cache, memo);
  } else if (static_cast<size_t>(__builtin_popcount(cache)) < k) {
    best = 1 + belady_brute(refs, k, pos + 1, cache | bit, memo);
  } else {
    best = std::numeric_limits<uint64_t>::max();
    for (uint32_t v = 0; v < 32; ++v)
      if (cache & (1u << v))
        best = std::min(best, 1 + belady_brute(refs, k, pos + 1, (cache & ~(1u << v)) | bit, memo));
  }
  memo[key] = best;
  return best;
}

uint64_t belady(const std::vector<ChunkId>& refs, size_t k) {
  std::map<std::pair<size_t, uint32_t>, uint64_t> memo;
  return belady_brute(refs, k, 0, 0, memo);
}

}  // namespace

TEST(PolicyLru, CyclicScanMissesEveryAccessAfterWarmup) {
  for (uint32_t n : {3u, 5u, 8u, 16u}) {
    for (size_t k = 1; k < n; ++k) {
      auto p = make_policy(PolicyKind::Lru, n);
      std::vector<bool> miss;
      const auto refs = cyclic(n, 4);
      const uint64_t m = simulate(*p, refs, k, &miss);
      EXPECT_EQ(m, refs.size()) << "n=" << n << " k=" << k;
      for (size_t s = n; s < refs.size(); ++s) EXPECT_TRUE(miss[s]) << "step " << s;
    }
  }
}

TEST(PolicyLru, VictimIsLeastRecentlyUsed) {
  auto p = make_policy(PolicyKind::Lru, 4);
  for (ChunkId c : {0u, 1u, 2u, 3u}) p->on_access(c);
  p->on_access(0);
  std::vector<ChunkId> res = {0, 1, 2, 3};
  EXPECT_EQ(p->choose_victim(res, [](ChunkId) { return true; }), 1u);
  EXPECT_EQ(p->choose_victim(res, [](ChunkId c) { return c != 1; }), 2u);
}

TEST(PolicyDeclared, EqualsBeladyOnCyclicScans) {
  for (uint32_t n = 2; n <= 10; ++n) {
    for (size_t k = 1; k <= n; ++k) {
      for (uint32_t passes : {1u, 2u, 3u, 5u}) {
        const auto refs = cyclic(n, passes);
        auto p = make_policy(PolicyKind::Declared, n);
        const uint64_t d = simulate(*p, refs, k);
        const uint64_t opt = belady(refs, k);
        EXPECT_EQ(d, opt) << "n=" << n << " k=" << k << " passes=" << passes;
      }
    }
  }
}

TEST(PolicyDeclared, NextUseDistances) {
  auto p = make_policy(PolicyKind::Declared, 5);
  // Before any signal the next step is 0.
  EXPECT_EQ(p->next_use(0), 0u);
  EXPECT_EQ(p->next_use(4), 4u);
  p->on_signal(2);  // chunk 2 consumed; next step 3
  EXPECT_EQ(p->next_use(3), 0u);
  EXPECT_EQ(p->next_use(2), 4u);  // just consumed: N steps after its consumption = N-1 from next
  EXPECT_EQ(p->next_use(0), 2u);
  p->on_signal(1);  // stale signal must not rewind
  EXPECT_EQ(p->cursor(), std::optional<uint64_t>(2));
  std::vector<ChunkId> res = {0, 2, 3};
  EXPECT_EQ(p->choose_victim(res, [](ChunkId) { return true; }), 2u);
  EXPECT_EQ(p->choose_victim(res, [](ChunkId c) { return c != 2; }), 0u);
}

// Tensor signals: a chunk the step being computed is done with is no longer "in the current
// step"; its next use is after that step, unless a later step shares it.
TEST(PolicyDeclared, ConsumedEarlyChunksAreUsedAfterTheirStep) {
  DeclaredSequence seq;
  seq.steps = {{0, 1, 2}, {2, 3}, {4, 5}};  // chunk 2 shared by steps 0 and 1; 7 accesses a pass
  DeclaredPolicy p(6, seq, false);
  p.on_signal(2);  // the pass's last step consumed: step 0 is being computed
  EXPECT_EQ(p.next_use(0), 0u);
  EXPECT_EQ(p.next_use(1), 1u);
  EXPECT_EQ(p.next_use(2), 2u);
  p.on_consumed(0);
  p.on_consumed(2);
  EXPECT_EQ(p.next_use(0), 7u);  // the next pass's step 0
  EXPECT_EQ(p.next_use(2), 3u);  // step 1 (flattened position 3) reads it next
  EXPECT_EQ(p.next_use(1), 1u);  // still to be read in this step
  std::vector<ChunkId> res = {0, 1, 2, 3, 4};
  EXPECT_EQ(p.choose_victim(res, [](ChunkId) { return true; }), 0u);
  p.on_signal(3);  // step 0 ends: the marks are of a past step
  EXPECT_EQ(p.next_use(2), 0u);
  EXPECT_EQ(p.next_use(0), 4u);
  // The last step of a pass: consumed chunks wrap to the next pass.
  p.on_signal(4);
  p.on_consumed(4);
  EXPECT_EQ(p.next_use(4), 7u);
  EXPECT_EQ(p.next_use(5), 1u);
}

TEST(PolicyPrefetch, CandidatesFollowTheCursor) {
  auto p = make_policy(PolicyKind::Prefetch, 6);
  EXPECT_EQ(p->prefetch_candidates(kNoCursor, 2), (std::vector<ChunkId>{0, 1}));
  EXPECT_EQ(p->prefetch_candidates(3, 2), (std::vector<ChunkId>{4, 5}));
  EXPECT_EQ(p->prefetch_candidates(5, 3), (std::vector<ChunkId>{0, 1, 2}));
  EXPECT_EQ(p->prefetch_candidates(11, 2), (std::vector<ChunkId>{0, 1}));  // wraps across passes
  EXPECT_EQ(p->prefetch_candidates(0, 10).size(), 6u);                     // never more than N
  // The declared engine has the same victims but no candidates.
  EXPECT_TRUE(make_policy(PolicyKind::Declared, 6)->prefetch_candidates(0, 2).empty());
  EXPECT_TRUE(make_policy(PolicyKind::Lru, 6)->prefetch_candidates(0, 2).empty());
}

TEST(PolicyPrefetch, VictimsAreFartherThanCandidates) {
  auto p = make_policy(PolicyKind::Prefetch, 8);
  p->on_signal(3);  // next step 4
  const auto cand = p->prefetch_candidates(3, 2);
  ASSERT_EQ(cand, (std::vector<ChunkId>{4, 5}));
  std::vector<ChunkId> res = {3, 4, 6};
  auto v = p->choose_victim(res, [](ChunkId) { return true; });
  ASSERT_TRUE(v);
  EXPECT_EQ(*v, 3u);
  EXPECT_GT(p->next_use(*v), p->next_use(cand[1]));
}

TEST(PolicyZero, EvictsAnythingEvictableAndEagerly) {
  auto p = make_policy(PolicyKind::Zero, 8);
  EXPECT_TRUE(p->evict_eagerly());
  std::vector<ChunkId> res = {5, 2, 7};
  EXPECT_EQ(p->choose_victim(res, [](ChunkId) { return true; }), 2u);
  EXPECT_FALSE(p->choose_victim(res, [](ChunkId) { return false; }).has_value());
  EXPECT_FALSE(make_policy(PolicyKind::Declared, 8)->evict_eagerly());
}

TEST(PolicyAll, VictimsNeverIncludeHeldChunks) {
  for (PolicyKind k : {PolicyKind::Lru, PolicyKind::Declared, PolicyKind::Prefetch, PolicyKind::Zero}) {
    auto p = make_policy(k, 10);
    for (ChunkId c = 0; c < 10; ++c) p->on_access(c);
    p->on_signal(4);
    std::vector<ChunkId> res = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    std::set<ChunkId> held = {0, 3, 4, 9};
    auto evictable = [&](ChunkId c) { return !held.count(c); };
    for (int round = 0; round < 6; ++round) {
      auto v = p->choose_victim(res, evictable);
      ASSERT_TRUE(v) << to_string(k);
      EXPECT_FALSE(held.count(*v)) << to_string(k) << " chose held chunk " << *v;
      res.erase(std::find(res.begin(), res.end(), *v));
    }
    EXPECT_FALSE(p->choose_victim(res, evictable).has_value()) << to_string(k);
  }
}

// ---- lru_k_per_layer ------------------------------------------------------------------------

namespace {

// Groups of `sizes[g]` consecutive chunks each.
LayerGroups groups_of(const std::vector<uint32_t>& sizes, uint32_t k) {
  LayerGroups g;
  for (uint32_t i = 0; i < sizes.size(); ++i) g.group_of.insert(g.group_of.end(), sizes[i], i);
  g.k = k;
  return g;
}

const Evictable kAll = [](ChunkId) { return true; };

}  // namespace

// Hand-built: groups {0,1,2} {3,4,5} {6}; K = 2. Group 0 holds three (over K): its least
// recent goes first even though a chunk of group 1 is older; then, no group over K, plain LRU.
TEST(PolicyLruK, EvictsTheLeastRecentOfAGroupOverKFirst) {
  LruKPolicy p(7, groups_of({3, 3, 1}, 2));
  EXPECT_EQ(p.kind(), PolicyKind::LruKPerLayer);
  EXPECT_STREQ(to_string(p.kind()), "lru_k_per_layer");
  for (ChunkId c : {3u, 0u, 1u, 2u, 4u, 6u}) p.on_access(c);
  std::vector<ChunkId> res = {0, 1, 2, 3, 4, 6};
  EXPECT_EQ(p.choose_victim(res, kAll), 0u);  // group 0 over K; plain LRU would take 3
  res.erase(std::find(res.begin(), res.end(), 0u));
  EXPECT_EQ(p.choose_victim(res, kAll), 3u);  // every group at most K: LRU
  // Recency moves with access: touching 1 again makes 2 group 0's least recent.
  p.on_access(0);
  p.on_access(1);
  res = {0, 1, 2, 3, 4, 6};
  EXPECT_EQ(p.choose_victim(res, kAll), 2u);
}

// Several groups over K: the least recent among all their chunks; an unevictable one is
// skipped, and when a group over K has nothing evictable the choice falls back to LRU.
TEST(PolicyLruK, SeveralGroupsOverKAndUnevictableChunks) {
  LruKPolicy p(6, groups_of({2, 2, 2}, 1));
  for (ChunkId c : {4u, 0u, 2u, 1u, 3u, 5u}) p.on_access(c);
  const std::vector<ChunkId> res = {0, 1, 2, 3, 4, 5};
  EXPECT_EQ(p.choose_victim(res, kAll), 4u);
  EXPECT_EQ(p.choose_victim(res, [](ChunkId c) { return c != 4; }), 0u);
  // Only group 0 over K, both its chunks held: plain LRU over the evictable rest.
  const std::vector<ChunkId> res2 = {0, 1, 3, 5};
  EXPECT_EQ(p.choose_victim(res2, [](ChunkId c) { return c > 1; }), 3u);
  EXPECT_FALSE(p.choose_victim(res2, [](ChunkId) { return false; }).has_value());
}

TEST(PolicyLruK, ConstructionChecksGroupsAndK) {
  EXPECT_THROW(LruKPolicy(4, groups_of({3}, 1)), std::invalid_argument);
  EXPECT_THROW(LruKPolicy(3, groups_of({3}, 0)), std::invalid_argument);
  EXPECT_THROW(make_policy(PolicyKind::LruKPerLayer, 4), std::invalid_argument);
  EXPECT_EQ(make_policy(PolicyKind::LruKPerLayer, 3, DeclaredSequence::cyclic(3), groups_of({3}, 1))->kind(),
            PolicyKind::LruKPerLayer);
}

// The cache simulation over a cyclic layer-by-layer pass (the generate shape: every group's
// chunks in a row, pass after pass) with random holds: never an unevictable victim, and after
// every eviction no group holds more than K unless every chunk of it beyond K was held or no
// other evictable chunk was left (the fallback).
TEST(PolicyLruK, KPerGroupHoldsAndNoHeldVictim) {
  const std::vector<uint32_t> sizes = {4, 5, 5, 5, 2};
  const uint32_t n = 21, k = 2, cap = 12;
  LruKPolicy p(n, groups_of(sizes, k));
  const auto g = groups_of(sizes, k).group_of;
  std::vector<ChunkId> resident;
  uint64_t misses = 0, seed = 7;
  for (uint32_t pass = 0; pass < 6; ++pass)
    for (ChunkId c = 0; c < n; ++c) {
      p.on_access(c);
      if (std::find(resident.begin(), resident.end(), c) != resident.end()) continue;
      ++misses;
      if (resident.size() == cap) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        const ChunkId held = static_cast<ChunkId>((seed >> 33) % n);
        auto evictable = [&](ChunkId x) { return x != c && x != held; };
        const auto v = p.choose_victim(resident, evictable);
        ASSERT_TRUE(v);
        ASSERT_TRUE(evictable(*v)) << "victim " << *v;
        resident.erase(std::find(resident.begin(), resident.end(), *v));
      }
      resident.push_back(c);
      p.on_access(c);
      // The group just filled may exceed K by the chunk in use; every other group is at most K+1
      // (one over while its chunk was held) and the earlier groups settle at K.
      std::vector<uint32_t> count(sizes.size(), 0);
      for (ChunkId r : resident) ++count[g[r]];
      for (uint32_t i = 0; i < sizes.size(); ++i) {
        if (i == g[c] || pass == 0) continue;
        EXPECT_LE(count[i], k + 1) << "pass " << pass << " chunk " << c << " group " << i;
      }
    }
  // The last K chunks of every group survive a pass: each later pass misses at most
  // n - (groups * K) + the held-chunk disturbances, far below plain LRU's n per pass.
  LruPolicy lru(n);
  const uint64_t lru_misses = simulate(lru, cyclic(n, 6), cap);
  EXPECT_EQ(lru_misses, 6u * n);
  EXPECT_LT(misses, lru_misses);
}

// With K at least every group's size no group is ever over K: the same victims as LRU.
TEST(PolicyLruK, EqualsLruWhenKCoversEveryGroup) {
  const std::vector<uint32_t> sizes = {3, 4, 2};
  LruKPolicy lk(9, groups_of(sizes, 4));
  LruPolicy lru(9);
  uint64_t seed = 11;
  for (int i = 0; i < 400; ++i) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    const ChunkId c = static_cast<ChunkId>((seed >> 33) % 9);
    lk.on_access(c);
    lru.on_access(c);
    std::vector<ChunkId> res;
    for (ChunkId x = 0; x < 9; ++x)
      if ((seed >> (x + 3)) & 1) res.push_back(x);
    auto ev = [&](ChunkId x) { return ((seed >> (x + 13)) & 3) != 0; };
    EXPECT_EQ(lk.choose_victim(res, ev), lru.choose_victim(res, ev)) << "step " << i;
  }
  EXPECT_EQ(simulate(lk, cyclic(9, 5), 5), simulate(lru, cyclic(9, 5), 5));
}
