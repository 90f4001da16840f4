#include "drivers/pager_arm.hpp"

#include <string>

#include "core/errors.hpp"

namespace resid {

void check_pager_fault(const FaultSpec& spec, Arm arm, SourceEngine source, const char* subcommand) {
  if (!spec.active()) return;
  const std::string cell = to_string(spec.cell), sub = subcommand;
  const bool generate = sub == "generate";
  const std::string here = std::string("short-read, eio, stale-completion, wrong-object, bundle-extent-failure, "
                                       "out-of-order, stall") + (generate ? ", recycle-live" : "");
  if (arm == Arm::KernelMmap)
    throw InputError("--fault " + cell + " needs a pager arm: kernel-mmap reads through the kernel's mapping, not a source");
  if (!is_source_fault(spec.cell) && !(generate && spec.cell == FaultCell::RecycleLive))
    throw InputError("--fault " + cell + " does not apply to " + sub + "; its cells are " + here);
  if (spec.cell == FaultCell::BundleExtentFailure && source != SourceEngine::Uring)
    throw InputError("--fault bundle-extent-failure needs read-ahead bundles of several reads (--source uring)");
}

}  // namespace resid
