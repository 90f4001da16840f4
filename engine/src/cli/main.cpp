// residctl: the native engine's command line (docs/run-contract.md).
// Exit 0: ok; 1: the run started and failed (run.json says why); 2: bad input, one line
// "residctl: error: ..." on stderr and nothing written.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <string>

#include "cli/generate_cli.hpp"
#include "cli/pager_arm_cli.hpp"
#include "cli/scan_cli.hpp"
#include "cli/stream_cli.hpp"
#include "core/errors.hpp"
#include "drivers/common/content_digests.hpp"
#include "drivers/probe/probe.hpp"
#include "drivers/quantize/quantize.hpp"
#include "source/fault.hpp"

namespace {

int input_error(const std::string& what) {
  std::string line = what;
  for (char& ch : line)
    if (ch == '\n' || ch == '\r') ch = ' ';
  std::fprintf(stderr, "residctl: error: %s\n", line.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"residctl: storage-backed residency engine (pager, sources, probes)", "residctl"};
  app.require_subcommand(1);
  std::string probe_dir = ".";
  auto* probe = app.add_subcommand("probe", "print the kernel features found, as JSON");
  probe->add_option("--dir", probe_dir, "where the O_DIRECT test file goes")->capture_default_str();
  auto* faults = app.add_subcommand("faults", "print the fault cells (source/fault_cells.json's table), as JSON");
  auto mkregion = resid::add_mkregion_subcommand(app);
  std::string inv_file, inv_out;
  uint64_t inv_chunk = 2u << 20;
  auto* inventory = app.add_subcommand("inventory", "the content digests of a file: XXH64 per chunk, sha256 of the whole");
  auto* inv_file_opt = inventory->add_option("--file", inv_file, "the file (required)");
  auto* inv_out_opt = inventory->add_option("--out", inv_out, "the digests file, written atomically (required)");
  resid::add_uint(inventory, "--chunk-size", inv_chunk, "bytes, a multiple of 4096")->capture_default_str();
  std::string q_in, q_out, q_type;
  bool q_pure = false;
  uint32_t q_threads = 2;
  auto* quantize = app.add_subcommand("quantize", "quantize a GGUF with the pinned llama.cpp's own quantizer");
  auto* q_in_opt = quantize->add_option("--in", q_in, "the GGUF to quantize (required)");
  auto* q_out_opt = quantize->add_option("--out", q_out, "the quantized GGUF, written atomically (required)");
  auto* q_type_opt = quantize->add_option("--type", q_type, "f16 | q4_0 | q4_1 | q8_0 | q4_k_s | q4_k_m | iq4_nl (required)");
  quantize->add_flag("--pure", q_pure, "every tensor to --type (no mixed recipe)");
  resid::add_uint(quantize, "--threads", q_threads, "quantizer threads")->capture_default_str();
  auto scan = resid::add_scan_subcommand(app);
  auto generate = resid::add_generate_subcommand(app);
  auto stream = resid::add_stream_subcommand(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return input_error(e.what());
  }
  // Required options are checked after parsing, so an unknown flag is reported as such, not
  // as whichever required option happens to be missing.
  try {
    if (*probe) {
      std::cout << resid::run_probe(probe_dir).dump(2) << std::endl;
      return 0;
    }
    if (*faults) {
      std::cout << resid::fault_cells_json().dump(2) << std::endl;
      return 0;
    }
    if (resid::mkregion_selected(*mkregion)) return resid::run_mkregion_cli(*mkregion);
    if (*inventory) {
      if (auto m = resid::missing({inv_file_opt, inv_out_opt}); !m.empty()) return input_error(m);
      return resid::run_inventory(inv_file, inv_chunk, inv_out);
    }
    if (*quantize) {
      if (auto m = resid::missing({q_in_opt, q_out_opt, q_type_opt}); !m.empty()) return input_error(m);
      return resid::run_quantize(q_in, q_out, q_type, q_pure, static_cast<int>(q_threads));
    }
    if (resid::scan_selected(*scan)) return resid::run_scan_cli(*scan);
    if (resid::generate_selected(*generate)) return resid::run_generate_cli(*generate);
    if (resid::stream_selected(*stream)) return resid::run_stream_cli(*stream);
  } catch (const resid::InputError& e) {
    return input_error(e.what());
  } catch (const std::exception& e) {
    // Anything else escaped before a run directory could be written: still one line.
    std::fprintf(stderr, "residctl: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
