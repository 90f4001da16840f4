#include "cli/stream_cli.hpp"

#include <string>

#include "cli/cli_util.hpp"
#include "core/errors.hpp"
#include "drivers/stream/stream.hpp"

namespace resid {

struct StreamCli {
  CLI::App* cmd = nullptr;
  StreamConfig cfg;
  SourceFlags source;
  std::string fault;
  std::string register_buffers = "off";
  uint64_t object_bytes = 0;
  uint64_t pattern_seed = 0;
  CLI::Option* pattern_seed_opt = nullptr;
  CLI::Option *file = nullptr, *out = nullptr, *manifest = nullptr, *object_bytes_opt = nullptr;
};

std::shared_ptr<StreamCli> add_stream_subcommand(CLI::App& app) {
  auto cli = std::make_shared<StreamCli>();
  StreamConfig& c = cli->cfg;
  auto* s = app.add_subcommand("stream", "stream objects through windows into a slot arena (the Plan lifecycle)");
  cli->cmd = s;
  cli->file = s->add_option("--file", c.file, "the canonical file (required)");
  cli->out = s->add_option("--out", c.out, "run directory, created (required)");
  cli->manifest = s->add_option("--manifest", c.manifest, "objects.json: objects and their extents");
  cli->object_bytes_opt = add_uint(s, "--object-bytes", cli->object_bytes, "fixed-size objects tiling the file");
  add_source_flags(s, cli->source, "uring");
  add_uint(s, "--window-bytes", c.window_bytes, "window capacity, a multiple of 4096")->capture_default_str();
  s->add_option("--register-buffers", cli->register_buffers, "uring: register the windows (read_fixed): on | off")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  add_uint(s, "--slots", c.slots, "slots of stable addresses")->capture_default_str();
  add_uint(s, "--consumers", c.consumers, "consumer threads; each version is declared to all of them")->capture_default_str();
  add_uint(s, "--passes", c.passes, "passes over the declared order")->capture_default_str();
  add_uint(s, "--bundle", c.bundle, "objects per request (published all-or-nothing)")->capture_default_str();
  s->add_flag("--eager-reconcile", c.eager_reconcile, "check every Plan invariant after every transition");
  add_fault_flag(s, cli->fault, "held-consumer: N is a step; out-of-order: a completion");
  cli->pattern_seed_opt = add_uint(s, "--pattern-seed", cli->pattern_seed,
                                "the file is a mkregion region of this seed: checksums from the pattern, not a read");
  s->add_option("--watchdog-s", c.watchdog_s, "fail instead of waiting longer than this many seconds")
      ->check(CLI::Range(0.001, 1e6))
      ->capture_default_str();
  return cli;
}

bool stream_selected(const StreamCli& cli) { return cli.cmd && cli.cmd->parsed(); }

int run_stream_cli(const StreamCli& cli) {
  if (cli.file->count() == 0) throw InputError("--file is required");
  if (cli.out->count() == 0) throw InputError("--out is required");
  StreamConfig c = cli.cfg;
  if (cli.object_bytes_opt->count() > 0) c.object_bytes = cli.object_bytes;
  cli.source.apply(c.source, c.windows, c.depth);
  if (cli.pattern_seed_opt->count() > 0) c.pattern_seed = cli.pattern_seed;
  if (!cli.fault.empty()) c.fault = parse_fault_spec(cli.fault);
  c.register_buffers = cli.register_buffers == "on";
  return run_stream(c);
}

}  // namespace resid
