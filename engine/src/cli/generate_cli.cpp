#include "cli/generate_cli.hpp"

#include "cli/pager_arm_cli.hpp"
#include "core/errors.hpp"
#include "drivers/generate/generate.hpp"

namespace resid {

struct GenerateCli {
  CLI::App* cmd = nullptr;
  GenerateConfig cfg;
  PagerArmFlags pager;
  std::string huge, consumption;
  CLI::Option *model = nullptr, *prompt = nullptr;
};

std::shared_ptr<GenerateCli> add_generate_subcommand(CLI::App& app) {
  auto cli = std::make_shared<GenerateCli>();
  GenerateConfig& c = cli->cfg;
  auto* g = app.add_subcommand("generate", "greedy decoding with llama.cpp through the kernel mapping or the pager");
  cli->cmd = g;
  cli->model = g->add_option("--model", c.model, "the GGUF (required)");
  add_pager_arm_flags(g, c.pager, cli->pager, "llama.cpp compute threads",
                      "fail a fault not served (or a generation not moving) within this many seconds",
                      "load the model and create the context, generate nothing", "held-consumer: N is an object step; reset-outstanding: a read; recycle-live: a pass; "
                      "shutdown-live-consumer: N unused");
  cli->prompt = g->add_option("--prompt", c.prompt, "the prompt (required)");
  add_uint(g, "--lru-k", c.pager.lru_k, "pager-lru-k: chunks each layer keeps resident by recency (required there, at least 1)");
  add_uint(g, "--tokens", c.tokens, "generated tokens (greedy)")->capture_default_str();
  add_uint(g, "--ctx", c.ctx, "context size")->capture_default_str();
  add_uint(g, "--progress-every", c.progress_every,
           "every N tokens one line 'residctl generate: progress ...' on stderr (for logs); 0: only on a terminal")
      ->capture_default_str();
  g->add_option("--huge-chunks", cli->huge,
                "off | move | collapse: how filled chunks are backed (default: move with 2 MiB-multiple chunks, else off)")
      ->check(CLI::IsMember({"off", "move", "collapse"}));
  g->add_option("--consumption", cli->consumption,
                "object | tensor: let a step's chunks go when the next object begins (default), or also inside the step "
                "once the node that last reads each tensor over them is computed")
      ->check(CLI::IsMember({"object", "tensor"}));
  g->add_option("--graph-plan", c.graph_plan, "object boundaries learned by an earlier run (no discovery pass)");
  g->add_option("--graph-plan-out", c.graph_plan_out, "write the object boundaries this run used or learned");
  g->add_option("--route-node", c.route_node,
                "negative control: read a MoE layer's routes at <NAME>-N instead of ffn_moe_topk-N (a name the graph "
                "lacks stops the run at the first expert-kernel read, naming the node)")
      ->capture_default_str();
  g->add_flag("--warm-request", c.warm_request,
              "C12: after the request, reset (llama.cpp's memory and the Plan), serve the same prompt again with the "
              "pager's resident chunks kept, reset again, shut down (run.json requests; a pager arm)");
  g->add_option("--draft", c.draft,
                "C4: greedy speculative decoding with this GGUF as the draft (its tokenizer must be the target's); run.json "
                "speculative");
  add_uint(g, "--draft-max", c.draft_max, "--draft: at most this many proposed tokens per target traversal")
      ->capture_default_str();
  g->add_flag("--repack", c.repack,
              "negative control: let llama.cpp repack weights at load; the load check then refuses a model whose weights "
              "are no longer file-backed (exit 2)");
  return cli;
}

bool generate_selected(const GenerateCli& cli) { return cli.cmd && cli.cmd->parsed(); }

int run_generate_cli(const GenerateCli& cli) {
  if (!generate_available()) return run_generate(cli.cfg);  // says how it was built
  if (auto m = missing({cli.model, cli.pager.out, cli.pager.arm_opt, cli.prompt}); !m.empty()) throw InputError(m);
  GenerateConfig c = cli.cfg;
  cli.pager.apply(c.pager);
  if (!cli.huge.empty()) c.huge = *parse_huge_chunks(cli.huge);
  if (cli.consumption == "tensor") c.consumption = Consumption::Tensor;
  return run_generate(c);
}

}  // namespace resid
