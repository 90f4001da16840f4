#include "drivers/common/arm.hpp"

namespace resid {

namespace {
constexpr Arm kArms[] = {Arm::KernelMmap, Arm::PagerLru, Arm::PagerDeclared, Arm::PagerPrefetch, Arm::PagerZero, Arm::PagerLruK};
}

const char* to_string(Arm a) {
  switch (a) {
    case Arm::KernelMmap: return "kernel-mmap";
    case Arm::PagerLru: return "pager-lru";
    case Arm::PagerDeclared: return "pager-declared";
    case Arm::PagerPrefetch: return "pager-prefetch";
    case Arm::PagerZero: return "pager-zero";
    case Arm::PagerLruK: return "pager-lru-k";
  }
  return "?";
}

std::optional<Arm> parse_arm(std::string_view s) {
  for (Arm a : kArms)
    if (s == to_string(a)) return a;
  return std::nullopt;
}

std::optional<PolicyKind> policy_of(Arm a) {
  switch (a) {
    case Arm::PagerLru: return PolicyKind::Lru;
    case Arm::PagerDeclared: return PolicyKind::Declared;
    case Arm::PagerPrefetch: return PolicyKind::Prefetch;
    case Arm::PagerZero: return PolicyKind::Zero;
    case Arm::PagerLruK: return PolicyKind::LruKPerLayer;
    case Arm::KernelMmap: return std::nullopt;
  }
  return std::nullopt;
}

const char* arm_names() { return "kernel-mmap | pager-lru | pager-declared | pager-prefetch | pager-zero | pager-lru-k"; }

std::vector<std::string> arm_list() {
  std::vector<std::string> v;
  for (Arm a : kArms) v.emplace_back(to_string(a));
  return v;
}

}  // namespace resid
