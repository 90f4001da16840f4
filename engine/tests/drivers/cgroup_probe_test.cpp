// `residctl probe`'s cgroup parsing.
#include <gtest/gtest.h>

#include "drivers/probe/cgroup_probe.hpp"

using namespace resid;

TEST(Cgroup, ParsesV1AndV2Lines) {
  const auto v1 = parse_proc_cgroup("9:name=systemd:/\n4:memory:/a/b\n1:cpu,cpuacct:/\n0::/\n");
  EXPECT_EQ(v1.v1_memory_path, std::optional<std::string>("/a/b"));
  EXPECT_EQ(v1.v2_path, std::optional<std::string>("/"));
  const auto v2 = parse_proc_cgroup("0::/user.slice/session-1.scope\n");
  EXPECT_FALSE(v2.v1_memory_path);
  EXPECT_EQ(v2.v2_path, std::optional<std::string>("/user.slice/session-1.scope"));
}
