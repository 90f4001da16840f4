#include "cli/pager_arm_cli.hpp"

#include <cstdlib>

namespace resid {

namespace {

const CLI::Validator kPositiveSeconds(
    [](std::string& v) -> std::string {
      char* end = nullptr;
      const double x = std::strtod(v.c_str(), &end);
      if (v.empty() || *end != '\0' || !(x > 0) || x > 1e6) return "'" + v + "' is not a positive number of seconds";
      return {};
    },
    "SECONDS");

// A nice value the kernel takes (-20..19) or `inherit`.
const CLI::Validator kNice(
    [](std::string& v) -> std::string {
      if (v == "inherit") return {};
      char* end = nullptr;
      const long x = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || x < -20 || x > 19) return "'" + v + "' is not a nice value in -20..19 or `inherit`";
      return {};
    },
    "N|inherit");

}  // namespace

void add_pager_arm_flags(CLI::App* app, PagerArmConfig& c, PagerArmFlags& f, const std::string& threads,
                         const std::string& watchdog, const std::string& calibrate, const std::string& fault_units) {
  f.out = app->add_option("--out", c.out, "run directory, created (required)");
  f.arm_opt = app->add_option("--arm", f.arm, std::string(arm_names()) + " (required)")
                  ->check(CLI::IsMember(arm_list()));
  f.budget_opt = add_uint(app, "--budget-bytes", f.budget, "weight-residency budget (pager arms)");
  add_uint(app, "--chunk-size", c.chunk_size, "bytes, a multiple of the page size")->capture_default_str();
  add_uint(app, "--threads", c.threads, threads)->capture_default_str();
  add_source_flags(app, f.source, "direct");
  add_uint(app, "--prefetch-depth", c.prefetch_depth, "pager-prefetch look-ahead in chunks")->capture_default_str();
  add_uint(app, "--readahead-steps", c.readahead_steps,
           "uring source: steps read ahead of the current one (0 = as far as the free windows reach)")
      ->capture_default_str();
  app->add_flag("--eager-reconcile", c.eager_reconcile, "mincore check after every fill and eviction");
  app->add_option("--watchdog-s", c.watchdog_s, watchdog)->check(kPositiveSeconds)->capture_default_str();
  app->add_flag("--calibrate", c.calibrate, calibrate);
  add_fault_flag(app, f.fault, fault_units);
  app->add_flag("--protect", c.protect,
                "mlock the pager's region on fault: the kernel cannot reclaim a resident chunk, only the pager evicts");
  app->add_option("--content-digests", c.content_digests,
                  "`residctl inventory`'s digests of the file: every fill is checked against its chunk's (pager arms)");
  app->add_option("--pager-nice", f.pager_nice,
                  "the pager thread's nice, -20..19, or `inherit` (the process's); below the process's needs CAP_SYS_NICE, "
                  "else the thread keeps the process's and run.json's pager_thread says why")
      ->check(kNice)
      ->capture_default_str();
}

void PagerArmFlags::apply(PagerArmConfig& c) const {
  c.arm = *parse_arm(arm);
  source.apply(c.source, c.windows, c.depth);
  if (budget_opt->count() > 0) c.budget_bytes = budget;
  if (!fault.empty()) c.fault = parse_fault_spec(fault);
  c.pager_nice = pager_nice == "inherit" ? std::nullopt : std::optional<int>(std::stoi(pager_nice));
}

std::string missing(std::initializer_list<CLI::Option*> opts) {
  for (auto* o : opts)
    if (o->count() == 0) return o->get_name() + " is required";
  return {};
}

}  // namespace resid
