#include "adapters/llama/graph_identity.hpp"

#include "core/sha256.hpp"
#include "ggml.h"

namespace resid {

namespace {

void append_shape(std::string& out, const ggml_tensor* t) {
  for (int d = 0; d < GGML_MAX_DIMS; ++d) {
    out += d ? ',' : '[';
    out += std::to_string(t->ne[d]);
  }
  out += ']';
}

}  // namespace

void GraphIdentity::start_pass() {
  if (open_) end_pass();
  open_ = true;
  pass_.clear();
  pass_nodes_ = 0;
}

void GraphIdentity::node(const ggml_tensor* t) {
  if (!open_) start_pass();
  pass_ += t->name;
  pass_ += '\t';
  pass_ += ggml_op_desc(t);
  pass_ += '\t';
  pass_ += ggml_type_name(t->type);
  append_shape(pass_, t);
  for (int i = 0; i < GGML_MAX_SRC; ++i) {
    if (!t->src[i]) continue;
    pass_ += '\t';
    pass_ += t->src[i]->name;
    append_shape(pass_, t->src[i]);
  }
  pass_ += '\n';
  ++pass_nodes_;
}

void GraphIdentity::end_pass() {
  if (!open_) return;
  open_ = false;
  pass_sha_.push_back(sha256_hex(pass_.data(), pass_.size()));
  nodes_ += pass_nodes_;
}

void GraphIdentity::expert_kernel(const ggml_tensor* node, const ggml_tensor* weight) {
  kernel_ops_.insert(ggml_op_desc(node));
  kernel_types_.insert(ggml_type_name(weight->type));
}

void GraphIdentity::router(const ggml_tensor* node) { route_ops_.insert(ggml_op_desc(node)); }

nlohmann::json GraphIdentity::graph_json() const {
  std::string all;
  for (const auto& s : pass_sha_) all += s + '\n';
  return {{"sha256", sha256_hex(all.data(), all.size())}, {"passes", pass_sha_.size()}, {"nodes", nodes_},
          {"pass_sha256", pass_sha_}};
}

nlohmann::json GraphIdentity::kernel_json() const {
  return {{"ops", std::vector<std::string>(kernel_ops_.begin(), kernel_ops_.end())},
          {"types", std::vector<std::string>(kernel_types_.begin(), kernel_types_.end())}};
}

}  // namespace resid
