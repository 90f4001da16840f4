// The pager study's arms (docs/design.md): the code names `scan` and `generate` share. Every
// arm but kernel-mmap (A) runs through the pager with one cache policy.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "policy/policy.hpp"

namespace resid {

enum class Arm { KernelMmap, PagerLru, PagerDeclared, PagerPrefetch, PagerZero, PagerLruK };

const char* to_string(Arm a);
std::optional<Arm> parse_arm(std::string_view s);
// The pager arm's cache policy; nullopt for kernel-mmap.
std::optional<PolicyKind> policy_of(Arm a);
// "kernel-mmap | pager-lru | ...": the arms, for a flag's help text.
const char* arm_names();
// Every arm's name, in the order of arm_names() (a flag's accepted values).
std::vector<std::string> arm_list();

}  // namespace resid
