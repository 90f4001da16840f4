// The consumer's graph as the eval callback sees it, for the consumer identity record
// (run.json `consumer`, reference 004 eq. 4: compared structurally between two executions,
// never inferred from equal outputs): every node of every pass, in order (its name, op,
// type and shape, and its sources' names and shapes), hashed per pass; the ops and weight
// types of the nodes that read expert tensors (the expert kernel); the op of the router's
// selection node. Data addresses are not part of it, so two runs of one build, model and
// prompt through different memory (the pager's region, the kernel's mapping) agree exactly
// when llama.cpp built and evaluated the same graphs.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

struct ggml_tensor;

namespace resid {

class GraphIdentity {
 public:
  void start_pass();
  void node(const ggml_tensor* t);  // at its ask=true call, in graph order
  void end_pass();
  // A node that reads expert tensor `weight`, and the router's selection node.
  void expert_kernel(const ggml_tensor* node, const ggml_tensor* weight);
  void router(const ggml_tensor* node);
  nlohmann::json graph_json() const;   // {sha256, passes, nodes, pass_sha256: [...]}
  nlohmann::json kernel_json() const;  // {ops, types}
  std::vector<std::string> router_ops() const { return {route_ops_.begin(), route_ops_.end()}; }

 private:
  bool open_ = false;
  std::string pass_;  // this pass's nodes, serialized
  uint64_t pass_nodes_ = 0, nodes_ = 0;
  std::vector<std::string> pass_sha_;
  std::set<std::string> kernel_ops_, kernel_types_, route_ops_;
};

}  // namespace resid
