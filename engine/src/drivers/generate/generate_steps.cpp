// `generate`'s object steps: llama.cpp's eval callback, through the llama adapter, says when
// each object's step begins; the chunks of the step are held (the pager's consumers) before
// the previous step's are let go, the consumption signal moves the pager's cursor, and every
// step's chunk accesses go to the trace (Belady's reference).
#include <algorithm>

#include "core/clock.hpp"
#include "core/mincore.hpp"
#include "drivers/generate/generate_run.hpp"

namespace resid {

namespace {
constexpr uint64_t kPage = 4096;
}

GenerateRun::GenerateRun(const GenerateConfig& cfg, Manifest m, GgufSummary g)
    : cfg_(cfg),
      a_(cfg.pager),
      m_(std::move(m)),
      g_(std::move(g)),
      steps_(m_.step_chunks()),
      S_(m_.steps_per_pass()),
      audit_(m_.chunks, steps_),
      trace_(reserve_records()),
      observer_(m_, *this) {
  observer_.set_route_node(cfg.route_node);
  observer_.set_tensor_signals(cfg.consumption == Consumption::Tensor);
  if (cfg.consumption == Consumption::Tensor) build_tensor_cover();
}

void GenerateRun::build_tensor_cover() {
  cover_.assign(S_, {});
  for (uint32_t o = 1; o < S_; ++o) {
    const auto& cs = steps_[o];
    cover_[o].assign(cs.size(), 0);
    for (uint32_t t : m_.objects[o].tensors) {
      if (m_.tensors[t].bytes == 0) continue;
      const auto [b, e] = tensor_chunk_range(m_.tensors[t], m_.chunk_size);
      for (auto it = std::lower_bound(cs.begin(), cs.end(), b); it != cs.end() && *it <= e; ++it)
        ++cover_[o][static_cast<size_t>(it - cs.begin())];
    }
  }
}

// A released tensor read again (a wrong release plan; the run fails at its end): its chunks
// let go early are held again until the step ends.
void GenerateRun::tensor_reread(uint32_t object, uint32_t tensor) {
  if (!pager_ || static_cast<int>(object) != early_obj_ || m_.tensors[tensor].bytes == 0) return;
  const auto& cs = steps_[object];
  const auto [b, e] = tensor_chunk_range(m_.tensors[tensor], m_.chunk_size);
  for (auto it = std::lower_bound(cs.begin(), cs.end(), b); it != cs.end() && *it <= e; ++it) {
    const auto i = static_cast<size_t>(it - cs.begin());
    if (!left_[i]) continue;
    left_[i] = 0;
    pager_->enter(*it);
  }
}

// The step of `obj` begins holding all of its chunks (none let go early yet).
void GenerateRun::start_early(int obj) {
  early_obj_ = -1;
  if (cover_.empty() || obj <= 0 || !cur_entered_) return;
  early_obj_ = obj;
  remaining_ = cover_[static_cast<size_t>(obj)];
  left_.assign(remaining_.size(), 0);
}

// Tensor signals: a chunk every tensor of the current step over it has consumed is let go
// now, as consumed (the policy then sees its next use after this step).
void GenerateRun::tensors_consumed(uint32_t object, const std::vector<uint32_t>& tensors) {
  if (!pager_ || static_cast<int>(object) != early_obj_) return;  // early_obj_ is cur_ when set
  const auto& cs = steps_[object];
  for (uint32_t t : tensors) {
    if (m_.tensors[t].bytes == 0) continue;
    const auto [b, e] = tensor_chunk_range(m_.tensors[t], m_.chunk_size);
    for (auto it = std::lower_bound(cs.begin(), cs.end(), b); it != cs.end() && *it <= e; ++it) {
      const auto i = static_cast<size_t>(it - cs.begin());
      if (remaining_[i] == 0 || --remaining_[i] > 0) continue;
      left_[i] = 1;
      ++early_leaves_;
      pager_->leave_consumed(*it);
    }
  }
}

size_t GenerateRun::reserve_records() const {
  uint64_t per_pass = 0;
  for (const auto& s : steps_) per_pass += s.size();
  const uint64_t passes = (cfg_.tokens + 2) * (cfg_.warm_request ? 2 : 1);
  return static_cast<size_t>(passes * (per_pass * 4 + S_) + 1024);
}

void GenerateRun::pass_started(std::optional<std::vector<ChunkId>> embd_rows) {
  if (pass_open_) finish_pass();  // a second graph within one llama_decode (long prompt)
  pass_open_ = true;
  cur_ = 0;
  cur_step_ = pass_ * S_;
  // The embd step reads the rows of this batch's tokens, nothing else of the embedding:
  // those chunks are its accesses (the reference trace) and what it holds.
  embd_access_ = embd_rows ? std::move(*embd_rows) : steps_[0];
  if (!embd_rows) ++embd_rows_unread_;
  pass_experts_.assign(m_.n_layer, {});
  pass_routed_.assign(m_.n_layer, 0);
  if (!pager_) probe_kernel(0);
  cur_entered_ = !oversize(0);
  if (pager_) pager_->set_step_oversize(!cur_entered_);
  if (cur_entered_) enter(0);
  start_early(0);
  touch_progress();
}

void GenerateRun::object_entered(uint32_t obj) {
  if (!pass_open_ || static_cast<int>(obj) != cur_ + 1) {
    ++sequence_errors_;
    if (!pass_open_ || static_cast<int>(obj) <= cur_) return;
  }
  const uint64_t consumed = cur_step_;
  const uint32_t old = static_cast<uint32_t>(cur_);
  const uint64_t next = pass_ * S_ + obj;
  record_accesses(old, consumed);  // arm A: the old object's entry probe, so first
  if (!pager_) probe_kernel(obj);
  const bool old_entered = cur_entered_;
  cur_entered_ = !oversize(obj);
  if (cur_entered_) enter(obj);  // the new chunks are held before the old ones are let go
  signal(consumed, next, !cur_entered_);
  if (old_entered) maybe_probe_recycle(old);
  if (old_entered) hold_for_cell(old, consumed, access_chunks(obj), !cur_entered_);
  if (old_entered) leave(old);
  ask_held_reuse(consumed);
  cur_ = static_cast<int>(obj);
  cur_step_ = next;
  start_early(cur_);
}

void GenerateRun::routes(int layer, std::vector<std::vector<int32_t>> experts) {
  if (layer >= 0 && static_cast<uint32_t>(layer) < pass_experts_.size()) {
    auto& u = pass_experts_[static_cast<size_t>(layer)];
    for (const auto& row : experts) u.insert(u.end(), row.begin(), row.end());
    std::sort(u.begin(), u.end());
    u.erase(std::unique(u.begin(), u.end()), u.end());
    pass_routed_[static_cast<size_t>(layer)] = 1;
  }
  nlohmann::ordered_json j = {{"pass", pass_}, {"layer", layer}, {"experts", experts}};
  std::lock_guard lk(routes_mu_);  // fail_now may write them from the monitor thread
  routes_.push_back(j.dump());
}

// The graph evaluation of this pass returned: its last object is consumed.
void GenerateRun::finish_pass() {
  if (!pass_open_) return;
  const uint64_t consumed = cur_step_;
  const uint32_t old = static_cast<uint32_t>(cur_);
  if (old + 1 != S_) ++sequence_errors_;  // the pass ended before its output object
  record_accesses(old, consumed);
  signal(consumed, (pass_ + 1) * S_, false);
  if (cur_entered_) leave(old);
  ask_held_reuse(consumed);
  cur_entered_ = false;
  pass_open_ = false;
  cur_ = -1;
  early_obj_ = -1;
  observer_.end_pass();
  passes_done_.store(++pass_);
  if (pass_ == kAuditPasses && !audit_error_) audit_error_ = startup_audit_error(audit_, m_, kAuditPasses);
}

// The objects (other than embd, decided per pass by its rows) that run oversize: their
// chunks cannot all be held at this budget, so none gets a live consumer; the pager pins the
// chunks each compute thread last faulted on instead.
nlohmann::json GenerateRun::oversize_objects() const {
  nlohmann::json a = nlohmann::json::array();
  if (!pager_) return a;
  for (uint32_t o = 1; o < S_; ++o)
    if (steps_[o].size() > fit_chunks_) a.push_back(m_.objects[o].name);
  return a;
}

void GenerateRun::enter(uint32_t obj) {
  if (pager_)
    for (ChunkId c : access_chunks(obj)) pager_->enter(c);
}

void GenerateRun::leave(uint32_t obj) {
  if (!pager_) return;
  const auto& cs = access_chunks(obj);
  const bool early = static_cast<int>(obj) == early_obj_;
  for (size_t i = 0; i < cs.size(); ++i)
    if (!early || !left_[i]) pager_->leave(cs[i]);
}

void GenerateRun::signal(uint64_t consumed, uint64_t next, bool next_oversize) {
  audit_.record(consumed);
  signals_.fetch_add(1, std::memory_order_relaxed);
  if (pager_) pager_->step_boundary(consumed, next, next_oversize);
  touch_progress();
}

const std::vector<ChunkId>& GenerateRun::read_chunks(uint32_t obj) {
  const ModelObject& o = m_.objects[obj];
  if (o.experts.empty()) return access_chunks(obj);
  const auto l = static_cast<size_t>(o.layer);
  if (l < pass_routed_.size() && pass_routed_[l]) {
    if (auto cs = m_.routed_chunks(obj, pass_experts_[l])) {
      ++moe_steps_routed_;
      routed_read_ = std::move(*cs);
      return routed_read_;
    }
  }
  ++moe_steps_unrouted_;  // no readable routes: every expert counted as read
  return access_chunks(obj);
}

// The step's access records: the chunks it read (arm A: a miss when a page of the chunk was
// absent at the step's entry, probed over what the step holds).
void GenerateRun::record_accesses(uint32_t obj, uint64_t step) {
  const auto& held = access_chunks(obj);
  const auto& cs = read_chunks(obj);
  for (const ChunkId c : cs) {
    bool miss;
    if (pager_) {
      miss = pager_->demand_filled_in(c, step);
    } else {
      const auto it = std::lower_bound(held.begin(), held.end(), c);
      miss = it != held.end() && *it == c && entry_miss_.at(static_cast<size_t>(it - held.begin())) != 0;
    }
    trace_.append(step, c, TraceKind::Access, miss ? kTraceMiss : 0);
    misses_.fetch_add(miss ? 1 : 0, std::memory_order_relaxed);
  }
  accesses_.fetch_add(cs.size(), std::memory_order_relaxed);
  steps_done_.fetch_add(1, std::memory_order_relaxed);
}

// Arm A: a chunk access is a miss when any mapped page of the chunk is absent just before
// the object's step (the pages llama.cpp unmapped are not asked about).
void GenerateRun::probe_kernel(uint32_t obj) {
  const auto& cs = access_chunks(obj);
  entry_miss_.assign(cs.size(), 0);
  if (!kmap_base_) return;
  for (size_t i = 0; i < cs.size(); ++i) {
    for (const auto& [b, e] : chunk_runs_[cs[i]]) {
      const PageCount pc = count_resident(kmap_base_ + b, e - b, mincore_buf_);
      if (!pc.ok || pc.present < pc.pages) {
        entry_miss_[i] = 1;
        break;
      }
    }
  }
}

// Mapped page runs of every chunk of llama.cpp's kernel mapping (arm A).
void GenerateRun::compute_chunk_runs(const MappingReport& mr) {
  chunk_runs_.assign(m_.chunks, {});
  const uint64_t mapped_end = (mr.length + kPage - 1) / kPage * kPage;
  std::vector<std::pair<uint64_t, uint64_t>> holes = mr.unmapped_fragments;
  for (auto& h : holes) {
    h.first = h.first / kPage * kPage;
    h.second = (h.second + kPage - 1) / kPage * kPage;
  }
  std::sort(holes.begin(), holes.end());
  for (uint32_t c = 0; c < m_.chunks; ++c) {
    uint64_t b = static_cast<uint64_t>(c) * m_.chunk_size;
    const uint64_t e = std::min(b + m_.chunk_size, mapped_end);
    for (const auto& [hb, he] : holes) {
      if (he <= b || hb >= e) continue;
      if (hb > b) chunk_runs_[c].emplace_back(b, hb);
      b = std::max(b, he);
    }
    if (b < e) chunk_runs_[c].emplace_back(b, e);
  }
}

void GenerateRun::touch_progress() { last_progress_ns_.store(now_ns(), std::memory_order_relaxed); }

// --fault recycle-live@N (a negative control): in pass N, at the first object change where
// the object just consumed still holds its chunks (its consumers leave right after), ask the
// Plan to recycle one of its resident chunks: it must refuse (consumers-live), and the chunk
// stays resident and untouched.
void GenerateRun::maybe_probe_recycle(uint32_t old) {
  if (a_.fault.cell != FaultCell::RecycleLive || probe_.fired || pass_ != a_.fault.at || !pager_) return;
  for (ChunkId c : access_chunks(old)) {
    if (!pager_->resident(c)) continue;
    probe_.fired = true;
    probe_.chunk = c;
    probe_.answer = pager_->try_recycle(c);
    probe_.resident_after = pager_->resident(c);
    return;
  }
}

std::string GenerateRun::probe_error() const {
  if (a_.fault.cell != FaultCell::RecycleLive || a_.calibrate) return {};
  if (!probe_.fired) return "negative control: the recycle probe of pass " + std::to_string(a_.fault.at) + " did not fire";
  if (probe_.answer != PlanError::ConsumersLive || !probe_.resident_after)
    return "negative control: the Plan answered " +
           std::string(probe_.answer == PlanError::None ? "recycled" : to_string(probe_.answer)) +
           " to recycling chunk " + std::to_string(probe_.chunk) + ", which had a live consumer";
  return {};
}

}  // namespace resid
