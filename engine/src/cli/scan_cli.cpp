#include "cli/scan_cli.hpp"

#include "adapters/synthetic/region.hpp"
#include "cli/pager_arm_cli.hpp"
#include "core/errors.hpp"
#include "drivers/scan/scan.hpp"

namespace resid {

struct ScanCli {
  CLI::App* cmd = nullptr;
  ScanConfig cfg;
  PagerArmFlags pager;
  std::string signal = "all-threads-finished", sync = "step";
  CLI::Option* region = nullptr;
};

std::shared_ptr<ScanCli> add_scan_subcommand(CLI::App& app) {
  auto cli = std::make_shared<ScanCli>();
  ScanConfig& c = cli->cfg;
  auto* s = app.add_subcommand("scan", "the synthetic lockstep layer scan");
  cli->cmd = s;
  cli->region = s->add_option("--region", c.region, "region file from mkregion (required)");
  add_uint(s, "--seed", c.seed, "pattern seed the file was made with")->capture_default_str();
  add_pager_arm_flags(s, c.pager, cli->pager, "driver threads", "fail a fault not served within this many seconds",
                      "set everything up, touch no region byte", "stall: the read from which storage stops answering");
  add_uint(s, "--passes", c.passes, "passes over the region")->capture_default_str();
  add_uint(s, "--compute-us", c.compute_us, "busy work per thread per chunk step")->capture_default_str();
  s->add_option("--signal", cli->signal, "all-threads-finished | thread0-started")
      ->check(CLI::IsMember({"all-threads-finished", "thread0-started"}))
      ->capture_default_str();
  s->add_option("--sync", cli->sync, "step (a barrier per chunk step: lockstep) | none (each thread at its own pace)")
      ->check(CLI::IsMember({"step", "none"}))
      ->capture_default_str();
  add_uint(s, "--jitter-us", c.jitter_us, "per thread and step, up to this much more compute (seeded)")->capture_default_str();
  add_uint(s, "--jitter-seed", c.jitter_seed, "the jitter's seed")->capture_default_str();
  return cli;
}

bool scan_selected(const ScanCli& cli) { return cli.cmd && cli.cmd->parsed(); }

int run_scan_cli(const ScanCli& cli) {
  if (auto m = missing({cli.region, cli.pager.out, cli.pager.arm_opt}); !m.empty()) throw InputError(m);
  ScanConfig c = cli.cfg;
  cli.pager.apply(c.pager);
  c.signal = *parse_signal(cli.signal);
  c.sync = *parse_sync(cli.sync);
  return run_scan(c);
}

struct MkregionCli {
  CLI::App* cmd = nullptr;
  std::string out;
  uint64_t size = 0, seed = 0;
  CLI::Option *out_opt = nullptr, *size_opt = nullptr, *seed_opt = nullptr;
};

std::shared_ptr<MkregionCli> add_mkregion_subcommand(CLI::App& app) {
  auto cli = std::make_shared<MkregionCli>();
  auto* mk = app.add_subcommand("mkregion", "write a synthetic region file of the offset pattern");
  cli->cmd = mk;
  cli->out_opt = mk->add_option("--out", cli->out, "output file (required)");
  cli->size_opt = add_uint(mk, "--size", cli->size, "bytes, a multiple of 4096 (required)");
  cli->seed_opt = add_uint(mk, "--seed", cli->seed, "pattern seed (required)");
  return cli;
}

bool mkregion_selected(const MkregionCli& cli) { return cli.cmd && cli.cmd->parsed(); }

int run_mkregion_cli(const MkregionCli& cli) {
  if (auto m = missing({cli.out_opt, cli.size_opt, cli.seed_opt}); !m.empty()) throw InputError(m);
  make_region(cli.out, cli.size, cli.seed);
  return 0;
}

}  // namespace resid
