// What `scan` and `generate` share as pager-arm drivers: their fault cells, their budget
// arithmetic and the checks of their flags (docs/run-contract.md, "Budget").
#pragma once

#include "drivers/arm.hpp"
#include "source/fault.hpp"
#include "source/source.hpp"

namespace resid {

// The cells a pager-arm subcommand takes (InputError naming the cell and the ones that do
// apply otherwise): every source cell on a pager arm, bundle-extent-failure only with the
// uring source's read-ahead bundles, recycle-live only in generate.
void check_pager_fault(const FaultSpec& spec, Arm arm, SourceEngine source, const char* subcommand);

}  // namespace resid
