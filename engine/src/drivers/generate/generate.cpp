#include "drivers/generate/generate.hpp"

#include "core/errors.hpp"

namespace resid {

const char* to_string(Consumption c) { return c == Consumption::Tensor ? "tensor" : "object"; }

}  // namespace resid

#if !RESID_WITH_LLAMA

namespace resid {

bool generate_available() { return false; }

int run_generate(const GenerateConfig&) {
  throw InputError(
      "this residctl was built without llama.cpp (RESID_WITH_LLAMA=OFF): `generate` is unavailable; "
      "rebuild with -DCMAKE_PREFIX_PATH=<llama.cpp install prefix> -DRESID_WITH_LLAMA=ON");
}

}  // namespace resid

#else  // RESID_WITH_LLAMA

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <thread>

#include "core/clock.hpp"
#include "core/fsutil.hpp"
#include "core/proc_io.hpp"
#include "drivers/generate/generate_run.hpp"
#include "policy/declared.hpp"

namespace resid {

bool generate_available() { return true; }

HugeChunks huge_mode(const GenerateConfig& c) {
  // --protect locks the region, and UFFDIO_MOVE refuses locked mappings: `off` by default then.
  const bool whole = c.pager.chunk_size % (2u << 20) == 0 && !c.pager.protect;
  return c.huge.value_or(whole ? HugeChunks::Move : HugeChunks::Off);
}

// ---- the budget and the pager (before anything is written) ----------------------------------

// pager-lru-k's groups: a chunk's group is the layer of the first layer object covering it (a
// chunk two neighbouring layers share goes to the lower); chunks of no layer (embd, output)
// are group n_layer.
static LayerGroups layer_groups(const Manifest& m, uint32_t k) {
  LayerGroups g{std::vector<uint32_t>(m.chunks, m.n_layer), k};
  for (const ModelObject& o : m.objects) {
    if (o.layer < 0) continue;
    for (ChunkId c : o.chunks) g.group_of[c] = std::min(g.group_of[c], static_cast<uint32_t>(o.layer));
  }
  return g;
}

void GenerateRun::open_pager() {
  FaultySourceHandle fs = open_pager_source(a_, cfg_.model);
  fault_report_ = std::move(fs.report);
  // A step that fits (at most fit_chunks_ chunks) holds every chunk with a live consumer for
  // the whole step; a larger one runs oversize: the pager pins, per compute thread, the last
  // two chunks it faulted on and evicts the rest of the step by the policy's rule (pager.hpp
  // has the progress argument). The hard minimum: the pins of every compute thread, one
  // chunk to fill, one of slack (the victim then never has to be a chunk a thread just
  // walked off, whose tail a slower thread may still be reading), plus arm E's prefetch
  // horizon; `collapse` also reserves the chunk MADV_COLLAPSE's transient huge page occupies.
  const uint64_t depth = a_.arm == Arm::PagerPrefetch ? a_.prefetch_depth : 0;
  const uint64_t min_chunks = static_cast<uint64_t>(Pager::kPinsPerThread) * a_.threads + 2 + depth;
  const uint64_t reserve = huge_mode(cfg_) == HugeChunks::Collapse ? 1 : 0;
  budget_ = pager_budget(a_, *fs.source, m_.chunks, min_chunks, reserve,
                         std::to_string(Pager::kPinsPerThread) + " x " + std::to_string(a_.threads) +
                             " compute thread(s) + 2" + (depth ? " + " + std::to_string(depth) + " prefetch depth" : ""));
  budget_chunks_ = budget_.budget_chunks;
  fit_chunks_ = budget_.budget_chunks - depth;
  PagerConfig pc = base_pager_config(a_, budget_.budget_chunks, m_.file_bytes);
  pc.step_chunks = steps_;
  pc.max_pins = a_.threads;
  pc.huge = huge_mode(cfg_);
  if (a_.fault.cell == FaultCell::ResetOutstanding) pc.reset_at_read = a_.fault.at;
  if (pc.readahead) {
    // F reads the next object's chunks while the current one computes. Not the embd
    // object's: its step reads the rows of a token not chosen yet (the previous pass's output
    // picks it). Nor an oversize object's: it cannot be held whole, it is read as its threads go.
    pc.readahead_steps = steps_;
    pc.readahead_steps[0].clear();
    for (auto& st : pc.readahead_steps)
      if (st.size() > fit_chunks_) st.clear();
  }
  // The policy's declared pass: the embd step declares none of the embedding, since it reads
  // only the rows of a token the previous pass has not chosen yet when the victims for it are
  // picked; declaring the whole matrix there made D hold the embedding (used whole only by a
  // tied output) at the expense of the layers (D/OPT 1.05-1.07 at r = 0.25..0.75 on
  // SmolLM2). Its rows are demand-filled as they are read.
  auto declared = steps_;
  declared[0].clear();
  pager_ = std::make_unique<Pager>(std::move(fs.source),
                                   make_policy(*policy_of(a_.arm), m_.chunks, DeclaredSequence{declared, false},
                                               layer_groups(m_, a_.lru_k)),
                                   pc, &trace_);
}

void GenerateRun::load_graph_plan() {
  const auto text = read_text_file(cfg_.graph_plan);
  if (!text) throw InputError("--graph-plan " + cfg_.graph_plan + " cannot be read");
  observer_.load_plans_text(*text, cfg_.graph_plan);
}

// ---- the watch and the verdict ---------------------------------------------------------------

// The generation's own watchdog: no consumption signal for the watchdog's time.
std::string GenerateRun::watch_error() {
  // The driver thread may stamp a progress time later than a `now` read before it: read the
  // stamp first, and never let the difference wrap (a wrapped one read as hours idle).
  const uint64_t last = last_progress_ns_.load(std::memory_order_relaxed);
  const uint64_t now = now_ns();
  const uint64_t idle = now > last ? now - last : 0;
  if (!in_generation_.load() || idle <= static_cast<uint64_t>(a_.watchdog_s * 1e9) || (pager_ && pager_->failed()))
    return {};
  const PagerStats ps = pager_ ? pager_->stats() : PagerStats{};
  return "watchdog: no consumption signal for " + std::to_string(a_.watchdog_s) + " s at pass " +
         std::to_string(passes_done_.load()) + " after " + std::to_string(steps_done_.load()) +
         " object steps (faults handled " + std::to_string(ps.faults_handled) + ", demand fills " +
         std::to_string(ps.demand_fills) + ", evictions " + std::to_string(ps.evictions) +
         "): the generation stopped making progress";
}

std::string GenerateRun::verdict() {
  const auto& os = observer_.stats();
  const bool generated = !a_.calibrate;
  PagerVerdict v;
  v.workload = run_error_;
  if (generated && (os.foreign_reads > 0 || os.outside_reads > 0 || os.reads_after_release > 0))
    v.audit = "consumption signal: " + std::to_string(os.foreign_reads) + " weight read(s) outside the current object, " +
              std::to_string(os.outside_reads) + " outside the model mapping, " + std::to_string(os.reads_after_release) +
              " after their tensor's release; first: " + os.first_violation;
  else if (generated && (sequence_errors_ > 0 || audit_.out_of_order() > 0))
    v.audit = "signal audit: " + std::to_string(sequence_errors_) + " object step(s) out of the declared order, " +
              std::to_string(audit_.out_of_order()) + " consumption signal(s) out of step order";
  v.control = probe_error();
  if (v.control.empty()) v.control = driver_cell_error();
  return pager_verdict(pager_.get(), v, a_, fault_report_.get());
}

int GenerateRun::execute() {
  {
    struct stat st{};
    if (::stat(cfg_.model.c_str(), &st) != 0) throw InputError("model file " + cfg_.model + " cannot be opened");
    dev_ = st.st_dev;
    ino_ = st.st_ino;
  }
  if (!cfg_.graph_plan.empty()) load_graph_plan();
  if (policy_of(a_.arm))
    open_pager();
  else if (a_.budget_bytes)
    budget_chunks_ = *a_.budget_bytes / a_.chunk_size;
  // Start cold: drop the model file's clean page-cache pages (our header read included).
  if (int fd = ::open(cfg_.model.c_str(), O_RDONLY | O_CLOEXEC); fd >= 0) {
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  }
  io0_.store(proc_read_bytes().value_or(0));
  io_end_.store(io0_.load());
  if (pager_) {
    pager_->set_failure_callback([this] { monitor_.pager_failed(); });
    pager_->set_step(0);
    pager_->set_loading();  // llama.cpp reads no weight while loading, unless it repacks or converts one
    pager_->start();
    model_mapping::substitute(dev_, ino_, const_cast<std::byte*>(pager_->base()), m_.file_bytes,
                              (m_.file_bytes + 4095) / 4096 * 4096);
  } else {
    model_mapping::observe(dev_, ino_);
  }
  touch_progress();
  std::thread driver([this] {
    drive();
    monitor_.workload_done();
  });
  if (std::string why = monitor_.watch(pager_.get(), [this] { return watch_error(); }, std::chrono::seconds(2));
      !why.empty())
    fail_now(why);
  driver.join();
  if (!input_error_.empty()) throw InputError(input_error_);
  if (!loaded_) make_dirs(a_.out);  // failed before the run directory existed (a refused mapping): for the evidence
  const std::string error = verdict();
  write_outputs(error, !a_.calibrate && error.empty());
  if (error.empty()) return 0;
  std::fprintf(stderr, "residctl: run failed: %s\n", one_line(error).c_str());
  return 1;
}

int run_generate(const GenerateConfig& cfg) {
  check_pager_arm(cfg.pager, 512, "generate");
  if (cfg.tokens == 0) throw InputError("--tokens must be at least 1");
  if (cfg.ctx < 8) throw InputError("--ctx must be at least 8");
  if (cfg.prompt.empty()) throw InputError("--prompt must not be empty");
  if (cfg.tokens >= cfg.ctx) throw InputError("--tokens must be smaller than --ctx");
  if (cfg.warm_request && !policy_of(cfg.pager.arm))
    throw InputError("--warm-request needs a pager arm: kernel-mmap has no Plan to reset and keeps no chunks of its own");
  if (cfg.warm_request && cfg.pager.calibrate) throw InputError("--warm-request serves requests; --calibrate generates nothing");
  if (cfg.warm_request && cfg.pager.fault.active())
    throw InputError("--warm-request takes no --fault (" + to_string(cfg.pager.fault) + "): a cell is judged on one request");
  if (!cfg.draft.empty()) {
    struct stat t{}, d{};
    if (::stat(cfg.draft.c_str(), &d) != 0) throw InputError("--draft " + cfg.draft + " cannot be opened");
    if (::stat(cfg.model.c_str(), &t) == 0 && t.st_dev == d.st_dev && t.st_ino == d.st_ino)
      throw InputError("--draft is the target's own file: a draft is a different (smaller) model");
    if (cfg.draft_max == 0) throw InputError("--draft-max must be at least 1");
    if (cfg.warm_request || cfg.pager.calibrate || cfg.pager.fault.active())
      throw InputError("--draft takes no --warm-request, --calibrate or --fault: a speculative run is one plain request");
  }
  capture_llama_log();
  // The model's header and tensor table (a split GGUF and a GGUF without architecture are
  // refused here), then whether llama.cpp knows the architecture, then the objects.
  GgufSummary g = read_gguf(cfg.model);
  llama_backend_init();
  struct BackendFree {
    ~BackendFree() { llama_backend_free(); }
  } backend_free;
  check_loadable(cfg.model, g);
  Manifest m;
  try {
    m = build_manifest(g.tensors, g.file_bytes, g.data_offset, cfg.pager.chunk_size, g.n_expert,
                       g.architecture + ".expert_count");
  } catch (const InputError& e) {
    throw InputError("model " + cfg.model + ": " + e.what());
  }
  if (static_cast<uint64_t>(cfg.tokens + 2) * (cfg.warm_request ? 2 : 1) * m.steps_per_pass() > UINT32_MAX)
    throw InputError("--tokens times the object steps per pass exceeds the trace's u32 step field");
  GenerateRun run(cfg, std::move(m), std::move(g));
  return run.execute();
}

}  // namespace resid

#endif  // RESID_WITH_LLAMA
