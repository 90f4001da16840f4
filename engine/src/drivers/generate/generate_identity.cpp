// `generate`'s identity records in run.json (reference 004 §2.2, eq. 4): the consumer (what
// computed the outputs: engine, adapter, runtime, graph, router, expert kernel, reduction,
// scheduling boundary) and the destination (where model memory lives: host and device).
// The pipeline compares both field by field between a run and its oracle; neither is
// inferred from equal outputs.
#include <optional>

#include "core/errors.hpp"
#include "core/sha256.hpp"
#include "drivers/generate/generate_run.hpp"
#include "resid_identity.hpp"

#ifndef RESID_LLAMA_COMMIT
#define RESID_LLAMA_COMMIT "unknown"
#endif

namespace resid {

namespace {

const char* gating_name(uint32_t f) {
  switch (f) {
    case 1: return "softmax";
    case 2: return "sigmoid";
    case 3: return "softmax-weight";
    case 4: return "sqrt-softplus";
    default: return "none";
  }
}

// The engine binary as it runs (this process's executable).
const std::string& engine_sha256() {
  static const std::string sha = [] {
    try {
      return sha256_file("/proc/self/exe");
    } catch (const RunError&) {
      return std::string("unreadable");
    }
  }();
  return sha;
}

}  // namespace

nlohmann::json GenerateRun::identity_json() const {
  return {{"engine_sha256", engine_sha256()}, {"adapter_sha256", RESID_ADAPTER_SHA256},
          {"source_sha256", RESID_SOURCE_SHA256}, {"plan_sha256", RESID_PLAN_SHA256},
          {"pager_sha256", RESID_PAGER_SHA256}};
}

nlohmann::json GenerateRun::consumer_json() const {
  const GraphIdentity& gi = observer_.graph();
  const std::string plan = observer_.plans_json().dump();
  const bool moe = !m_.experts.empty();
  nlohmann::json router = nullptr, kernel = nullptr;
  if (moe) {
    router = {{"node", observer_.route_node() + "-N"}, {"ops", gi.router_ops()}, {"n_expert", g_.n_expert},
              {"n_expert_used", g_.n_expert_used},
              {"gating", g_.expert_gating_func ? nlohmann::json(gating_name(*g_.expert_gating_func)) : nlohmann::json(nullptr)}};
    kernel = gi.kernel_json();
    kernel["backend"] = "CPU";
  }
  nlohmann::json graph = gi.graph_json();
  graph["architecture"] = g_.architecture;
  return {{"engine", {{"sha256", engine_sha256()}}},
          {"adapter", {{"name", "llama"}, {"sha256", RESID_ADAPTER_SHA256}}},
          {"runtime", {{"name", "llama.cpp"}, {"commit", RESID_LLAMA_COMMIT}, {"use_extra_bufts", cfg_.repack}}},
          {"graph", graph},
          {"router", router},
          {"expert_kernel", kernel},
          {"reduction", {{"backend", "CPU"}, {"threads", a_.threads}, {"threadpool", "persistent"}}},
          {"scheduling_boundary",
           {{"signal", "eval-callback"},
            {"rule", "each object is entered after the node before its first weight read (learned from the graph)"},
            {"plan_sha256", sha256_hex(plan.data(), plan.size())}}}};
}

nlohmann::json GenerateRun::destination_json() const {
  nlohmann::json host;
  if (pager_)
    host = {{"memory", "pager-region"}, {"addresses", "stable (userfaultfd region replacing the file mapping)"},
            {"bytes", m_.file_bytes}, {"chunk_size", m_.chunk_size}, {"publication", to_string(huge_mode(cfg_))}};
  else
    host = {{"memory", "file-mapping"}, {"addresses", "the kernel's mmap of the model file"}, {"bytes", m_.file_bytes}};
  return {{"host", host}, {"device", {{"memory", "none"}, {"offloaded_layers", 0}}}};
}

}  // namespace resid
