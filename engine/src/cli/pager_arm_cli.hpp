// The flags `scan` and `generate` share (drivers/common/pager_arm.hpp's PagerArmConfig), registered
// once.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "cli/cli_util.hpp"
#include "drivers/common/pager_arm.hpp"

namespace resid {

struct PagerArmFlags {
  std::string arm, fault;
  std::string pager_nice = std::to_string(kDefaultPagerNice);
  uint64_t budget = 0;
  SourceFlags source;
  CLI::Option *out = nullptr, *arm_opt = nullptr, *budget_opt = nullptr;

  // Into the config (after parsing; the values the parser checked).
  void apply(PagerArmConfig& c) const;
};

// --out --arm --budget-bytes --chunk-size --threads --source --windows --depth
// --prefetch-depth --eager-reconcile --watchdog-s --calibrate --fault --protect
// --content-digests --pager-nice; `threads` and
// `watchdog` say what the threads are and what the watchdog watches.
void add_pager_arm_flags(CLI::App* app, PagerArmConfig& c, PagerArmFlags& f, const std::string& threads,
                         const std::string& watchdog, const std::string& calibrate, const std::string& fault_units);

// "--flag is required" for the first required option not given ("" when all are).
std::string missing(std::initializer_list<CLI::Option*> opts);

}  // namespace resid
