// Arms D and E: the declared sequence of steps, each touching a set of chunks (the llama
// adapter's object steps: embd, layer.0 .. layer.L-1, output, repeated every pass; the
// synthetic scan's cyclic order, one chunk per step), plus the consumption cursor, give
// every chunk's next use; evict the evictable chunk used farthest in the future (Belady
// over the declared order). Arm E also names the next declared chunks as prefetch candidates.
//
// The declared pass is flattened into one access per (step, chunk), chunks ascending within
// a step: the same order as the access records of trace.bin, i.e. Belady's reference. The
// next use of a chunk is the distance, in flattened accesses, from the start of the next
// step (cursor + 1, which in generate is the step being computed) to the chunk's next
// occurrence, wrapping into the next pass. Distances are distinct per chunk, so there are
// no ties; a chunk in no step is never used (UINT64_MAX, evicted first).
//
// Oversize steps (a step whose chunks cannot all stay resident at the budget, e.g. the
// 17-chunk tied output of SmolLM2 at r = 0.25): its chunks have no live consumers, so the
// policy must choose among chunks of the step being computed, and the declared order alone
// cannot tell a chunk the compute threads are done with from one they have not reached (all
// are "in the current step"). The in-step rule: while an oversize step is current, the
// victim is the evictable chunk of that step that was filled earliest in this step; only
// when there is none does the farthest-next-use rule apply. Why: llama.cpp's matrix products
// walk the weight rows forward (the threads take row blocks from a shared counter in
// ascending order), so a chunk filled early in the step has been passed by every thread,
// and its next use is in the next pass (after every other step: the farthest there is, as
// MIN would choose), whereas the most recent fills are where the threads are now (the pager
// also pins the chunk each thread last faulted on). Chunks of the step that were resident
// before it started are not known to be passed and keep their declared distance.
//
// Tensor signals (on_consumed): a chunk the step being computed is done with, before the
// step ends, is no longer "in the current step": its next use is its next occurrence after
// that step (the next pass, unless a later step shares it), so the farthest-next-use rule
// picks it as MIN would, not the chunks of steps still to come.
#pragma once

#include <vector>

#include "policy/lru_k.hpp"

namespace resid {

// One declared pass. Prefetch candidates start after the step being computed (cursor + 1):
// generate holds that step's chunks (entered) before it signals, so they are demand-filled
// as touched. The cyclic scan's drivers enter a step's chunk only as they start it, so its
// candidates start at the step being computed (prefetch_current).
struct DeclaredSequence {
  std::vector<std::vector<ChunkId>> steps;
  bool prefetch_current = false;
  // Step s is chunk s (0..chunks-1), prefetch_current.
  static DeclaredSequence cyclic(uint32_t chunks);
};

class DeclaredPolicy final : public Policy {
 public:
  // Every chunk id of `seq` < chunks.
  DeclaredPolicy(uint32_t chunks, DeclaredSequence seq, bool prefetch);
  PolicyKind kind() const override { return prefetch_ ? PolicyKind::Prefetch : PolicyKind::Declared; }
  void on_access(ChunkId) override {}
  void on_signal(uint64_t cursor) override;
  std::optional<ChunkId> choose_victim(std::span<const ChunkId> resident,
                                       const Evictable& evictable) const override;
  // Up to n distinct chunks of the steps after the one being computed (cursor + 1), in
  // declared order, none of which is in the step being computed; with prefetch_current,
  // from the step being computed on. Empty for arm D.
  std::vector<ChunkId> prefetch_candidates(uint64_t cursor, size_t n) const override;
  uint64_t next_use(ChunkId c) const override;
  std::optional<uint64_t> cursor() const override { return cursor_; }
  void on_step_mode(bool oversize) override { oversize_ = oversize; }
  void on_fill(ChunkId c) override;
  void on_consumed(ChunkId c) override;

  size_t steps_per_pass() const { return steps_.size(); }
  uint64_t accesses_per_pass() const { return flat_; }

 private:
  uint64_t next_step() const { return cursor_ ? *cursor_ + 1 : 0; }

  uint32_t n_;
  std::vector<std::vector<ChunkId>> steps_;      // each sorted, unique
  bool prefetch_current_ = false;
  std::vector<uint64_t> step_start_;              // flattened position of each step's first access
  uint64_t flat_ = 0;                             // accesses per pass
  std::vector<std::vector<uint64_t>> occ_;        // per chunk: flattened positions, ascending
  bool prefetch_;
  std::optional<uint64_t> cursor_;
  bool oversize_ = false;                         // the step being computed is oversize
  uint64_t fill_clock_ = 0;
  std::vector<uint64_t> fill_step_;               // per chunk: the step of its last fill
  std::vector<uint64_t> fill_seq_;                // per chunk: when (fill_clock_) it was filled
  std::vector<uint64_t> consumed_step_;           // per chunk: the step (+1) that consumed it early, 0: none
  mutable std::vector<uint64_t> seen_;            // prefetch_candidates' scratch: stamp per chunk
  mutable uint64_t seen_stamp_ = 0;
};

// Every engine by kind: lru and zero need no sequence; declared and prefetch follow `seq`;
// lru_k_per_layer takes `groups` (std::invalid_argument without one group per chunk).
std::unique_ptr<Policy> make_policy(PolicyKind kind, uint32_t chunks, DeclaredSequence seq, LayerGroups groups = {});
// The same over the cyclic sequence 0..chunks-1 (the synthetic scan; no lru_k_per_layer).
std::unique_ptr<Policy> make_policy(PolicyKind kind, uint32_t chunks);

}  // namespace resid
