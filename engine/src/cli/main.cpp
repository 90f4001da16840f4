// residctl: the native engine's command line (docs/run-contract.md).
// Exit 0: ok; 1: the run started and failed (run.json says why); 2: bad input, one line
// "residctl: error: ..." on stderr and nothing written.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

#include "adapters/synthetic/region.hpp"
#include "cli/cli_util.hpp"
#include "cli/stream_cli.hpp"
#include "core/errors.hpp"
#include "drivers/generate.hpp"
#include "drivers/probe.hpp"
#include "drivers/scan.hpp"

using resid::add_fault_flag;
using resid::add_uint;

namespace {

int input_error(const std::string& what) {
  std::string line = what;
  for (char& ch : line)
    if (ch == '\n' || ch == '\r') ch = ' ';
  std::fprintf(stderr, "residctl: error: %s\n", line.c_str());
  return 2;
}

const CLI::Validator kPositiveSeconds(
    [](std::string& v) -> std::string {
      char* end = nullptr;
      const double x = std::strtod(v.c_str(), &end);
      if (v.empty() || *end != '\0' || !(x > 0) || x > 1e6) return "'" + v + "' is not a positive number of seconds";
      return {};
    },
    "SECONDS");

// Required options are checked after parsing so an unknown flag is reported as such,
// not as whichever required option happens to be missing.
std::string missing(std::initializer_list<CLI::Option*> opts) {
  for (auto* o : opts)
    if (o->count() == 0) return o->get_name() + " is required";
  return {};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"residctl: storage-backed residency engine (pager, sources, probes)", "residctl"};
  app.require_subcommand(1);

  // probe
  std::string probe_dir = ".";
  auto* probe = app.add_subcommand("probe", "print the kernel features found, as JSON");
  probe->add_option("--dir", probe_dir, "where the O_DIRECT test file goes")->capture_default_str();

  // mkregion
  std::string mk_out;
  uint64_t mk_size = 0, mk_seed = 0;
  auto* mk = app.add_subcommand("mkregion", "write a synthetic region file of the offset pattern");
  auto* mk_out_opt = mk->add_option("--out", mk_out, "output file (required)");
  auto* mk_size_opt = add_uint(mk, "--size", mk_size, "bytes, a multiple of 4096 (required)");
  auto* mk_seed_opt = add_uint(mk, "--seed", mk_seed, "pattern seed (required)");

  // scan
  resid::ScanConfig sc;
  std::string arm, signal = "all-threads-finished";
  uint64_t budget = 0;
  auto* scan = app.add_subcommand("scan", "the synthetic lockstep layer scan");
  auto* region_opt = scan->add_option("--region", sc.region, "region file from mkregion (required)");
  add_uint(scan, "--seed", sc.seed, "pattern seed the file was made with")->capture_default_str();
  auto* out_opt = scan->add_option("--out", sc.out, "run directory, created (required)");
  auto* arm_opt =
      scan->add_option("--arm", arm, "kernel-mmap | pager-lru | pager-declared | pager-prefetch | pager-zero (required)")
      ->check(CLI::IsMember({"kernel-mmap", "pager-lru", "pager-declared", "pager-prefetch", "pager-zero"}));
  auto* budget_opt = add_uint(scan, "--budget-bytes", budget, "weight-residency budget (pager arms)");
  add_uint(scan, "--chunk-size", sc.chunk_size, "bytes, a multiple of the page size")->capture_default_str();
  add_uint(scan, "--passes", sc.passes, "passes over the region")->capture_default_str();
  add_uint(scan, "--threads", sc.threads, "driver threads")->capture_default_str();
  add_uint(scan, "--compute-us", sc.compute_us, "busy work per thread per chunk step")->capture_default_str();
  scan->add_option("--signal", signal, "all-threads-finished | thread0-started")
      ->check(CLI::IsMember({"all-threads-finished", "thread0-started"}))
      ->capture_default_str();
  resid::SourceFlags s_source;
  add_source_flags(scan, s_source, "direct");
  add_uint(scan, "--prefetch-depth", sc.prefetch_depth, "pager-prefetch look-ahead in chunks")->capture_default_str();
  scan->add_flag("--eager-reconcile", sc.eager_reconcile, "mincore check after every fill and eviction");
  scan->add_option("--watchdog-s", sc.watchdog_s, "fail a fault not served within this many seconds")
      ->check(kPositiveSeconds)
      ->capture_default_str();
  scan->add_flag("--calibrate", sc.calibrate, "set everything up, touch no region byte");
  std::string s_fault;
  add_fault_flag(scan, s_fault, "stall: the read from which storage stops answering");

  // generate
  resid::GenerateConfig gc;
  std::string g_arm, g_huge;
  uint64_t g_budget = 0;
  auto* gen = app.add_subcommand("generate", "greedy decoding with llama.cpp through the kernel mapping or the pager");
  auto* g_model_opt = gen->add_option("--model", gc.model, "the GGUF (required)");
  auto* g_out_opt = gen->add_option("--out", gc.out, "run directory, created (required)");
  auto* g_arm_opt =
      gen->add_option("--arm", g_arm, "kernel-mmap | pager-lru | pager-declared | pager-prefetch | pager-zero (required)")
          ->check(CLI::IsMember({"kernel-mmap", "pager-lru", "pager-declared", "pager-prefetch", "pager-zero"}));
  auto* g_budget_opt = add_uint(gen, "--budget-bytes", g_budget, "weight-residency budget (pager arms)");
  add_uint(gen, "--chunk-size", gc.chunk_size, "bytes, a multiple of the page size")->capture_default_str();
  auto* g_prompt_opt = gen->add_option("--prompt", gc.prompt, "the prompt (required)");
  add_uint(gen, "--tokens", gc.tokens, "generated tokens (greedy)")->capture_default_str();
  add_uint(gen, "--threads", gc.threads, "llama.cpp compute threads")->capture_default_str();
  add_uint(gen, "--ctx", gc.ctx, "context size")->capture_default_str();
  resid::SourceFlags g_source;
  add_source_flags(gen, g_source, "direct");
  add_uint(gen, "--prefetch-depth", gc.prefetch_depth, "pager-prefetch look-ahead in chunks")->capture_default_str();
  gen->add_flag("--eager-reconcile", gc.eager_reconcile, "mincore check after every fill and eviction");
  gen->add_option("--watchdog-s", gc.watchdog_s, "fail a fault not served (or a generation not moving) within this many seconds")
      ->check(kPositiveSeconds)
      ->capture_default_str();
  gen->add_flag("--calibrate", gc.calibrate, "load the model and create the context, generate nothing");
  gen->add_option("--huge-chunks", g_huge,
                  "off | move | collapse: how filled chunks are backed (default: move with 2 MiB-multiple chunks, else off)")
      ->check(CLI::IsMember({"off", "move", "collapse"}));
  std::string g_fault;
  add_fault_flag(gen, g_fault, "recycle-live: N is a pass");

  // stream
  auto stream_cli = resid::add_stream_subcommand(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return input_error(e.what());
  }

  try {
    if (*probe) {
      std::cout << resid::run_probe(probe_dir).dump(2) << std::endl;
      return 0;
    }
    if (*mk) {
      if (auto m = missing({mk_out_opt, mk_size_opt, mk_seed_opt}); !m.empty()) return input_error(m);
      resid::make_region(mk_out, mk_size, mk_seed);
      return 0;
    }
    if (*scan) {
      if (auto m = missing({region_opt, out_opt, arm_opt}); !m.empty()) return input_error(m);
      sc.arm = *resid::parse_arm(arm);
      sc.signal = *resid::parse_signal(signal);
      s_source.apply(sc.source, sc.windows, sc.depth);
      if (budget_opt->count() > 0) sc.budget_bytes = budget;
      if (!s_fault.empty()) sc.fault = resid::parse_fault_spec(s_fault);
      return resid::run_scan(sc);
    }
    if (resid::stream_selected(*stream_cli)) return resid::run_stream_cli(*stream_cli);
    if (*gen) {
      if (!resid::generate_available()) return resid::run_generate(gc);  // says how it was built
      if (auto m = missing({g_model_opt, g_out_opt, g_arm_opt, g_prompt_opt}); !m.empty()) return input_error(m);
      gc.arm = *resid::parse_arm(g_arm);
      g_source.apply(gc.source, gc.windows, gc.depth);
      if (!g_huge.empty()) gc.huge = *resid::parse_huge_chunks(g_huge);
      if (g_budget_opt->count() > 0) gc.budget_bytes = g_budget;
      if (!g_fault.empty()) gc.fault = resid::parse_fault_spec(g_fault);
      return resid::run_generate(gc);
    }
  } catch (const resid::InputError& e) {
    return input_error(e.what());
  } catch (const std::exception& e) {
    // Anything else escaped before a run directory could be written: still one line.
    std::fprintf(stderr, "residctl: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
