// What the graph read of the model's weights (demand.json): for every tensor a graph node
// read at least once, how it read it. The pipeline's semantic-demand lower bound U_sem^LB
// (reference 004 §2.1) is made from this record and the routes, never from what the pager
// or the source requested.
//
//   whole    a computing node read the whole tensor (a matrix product, a norm, a bias)
//   rows     GET_ROWS read some of its rows (the token embedding): the row ids and row size
//   experts  an expert kernel (MUL_MAT_ID, ADD_ID) read it: the slices of the experts the
//            router picked, which routes.jsonl says
//   partial  a node read a view of part of it (not counted: a lower bound infers nothing)
//
// View nodes (VIEW, RESHAPE, PERMUTE, TRANSPOSE) compute nothing and are not reads; the node
// that reads the view is. Called from the eval observer's ask=true call, before the node
// is computed (the token ids of GET_ROWS are set before the graph runs).
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "adapters/llama/objects.hpp"

struct ggml_tensor;

namespace resid {

class DemandRecord {
 public:
  explicit DemandRecord(const Manifest& m) : m_(m), modes_(m.tensors.size(), 0) {}
  // Node `node` reads `src` (its source number `i`), which lies in tensor `tensor`; `expert`:
  // the tensor is stacked per expert. `offset`: where src's data lies in the file.
  void weight_read(const ggml_tensor* node, int i, const ggml_tensor* src, uint32_t tensor, bool expert,
                   uint64_t offset);
  nlohmann::json to_json() const;

  static constexpr uint8_t kWhole = 1, kRows = 2, kExperts = 4, kPartial = 8;

 private:
  const Manifest& m_;
  std::vector<uint8_t> modes_;                  // per tensor, the ways it was read
  std::map<uint32_t, std::set<int32_t>> rows_;  // GET_ROWS: the row ids read, per tensor
  std::map<uint32_t, uint64_t> row_bytes_;
};

// A node that computes nothing (a view of its source).
bool is_view_op(const ggml_tensor* node);

}  // namespace resid
