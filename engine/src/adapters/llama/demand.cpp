#include "adapters/llama/demand.hpp"

#include <cstring>

#include "ggml.h"

namespace resid {

bool is_view_op(const ggml_tensor* node) {
  switch (node->op) {
    case GGML_OP_NONE:
    case GGML_OP_VIEW:
    case GGML_OP_RESHAPE:
    case GGML_OP_PERMUTE:
    case GGML_OP_TRANSPOSE: return true;
    default: return false;
  }
}

namespace {

// The row ids of GET_ROWS (src[1], I32, contiguous), or false.
bool row_ids(const ggml_tensor* node, std::vector<int32_t>& out) {
  const ggml_tensor* ids = node->src[1];
  if (!ids || !ids->data || ids->type != GGML_TYPE_I32 || !ggml_is_contiguous(ids)) return false;
  const int64_t n = ggml_nelements(ids);
  out.resize(static_cast<size_t>(n));
  std::memcpy(out.data(), ids->data, static_cast<size_t>(n) * sizeof(int32_t));
  return true;
}

}  // namespace

void DemandRecord::weight_read(const ggml_tensor* node, int i, const ggml_tensor* src, uint32_t tensor, bool expert,
                               uint64_t offset) {
  if (is_view_op(node)) return;
  const TensorInfo& ti = m_.tensors[tensor];
  if (expert) {
    modes_[tensor] |= kExperts;
    return;
  }
  if (node->op == GGML_OP_GET_ROWS && i == 0) {
    std::vector<int32_t> ids;
    const uint64_t row = ggml_row_size(src->type, src->ne[0]);
    if (offset == ti.offset && static_cast<uint64_t>(src->nb[1]) == row && row_ids(node, ids)) {
      modes_[tensor] |= kRows;
      row_bytes_[tensor] = row;
      rows_[tensor].insert(ids.begin(), ids.end());
      return;
    }
    modes_[tensor] |= kPartial;
    return;
  }
  const bool whole = offset == ti.offset && ggml_nbytes(src) == ti.bytes;
  modes_[tensor] |= whole ? kWhole : kPartial;
}

nlohmann::json DemandRecord::to_json() const {
  nlohmann::json ts = nlohmann::json::array();
  for (uint32_t t = 0; t < modes_.size(); ++t) {
    if (!modes_[t]) continue;
    nlohmann::json how = nlohmann::json::array();
    for (auto [bit, word] : {std::pair{kWhole, "whole"}, {kRows, "rows"}, {kExperts, "experts"}, {kPartial, "partial"}})
      if (modes_[t] & bit) how.push_back(word);
    nlohmann::json e = {{"name", m_.tensors[t].name}, {"offset", m_.tensors[t].offset}, {"bytes", m_.tensors[t].bytes},
                        {"read", how}};
    if (modes_[t] & kRows) {
      e["row_bytes"] = row_bytes_.at(t);
      e["rows"] = std::vector<int32_t>(rows_.at(t).begin(), rows_.at(t).end());
    }
    ts.push_back(std::move(e));
  }
  return {{"schema_version", 1},
          {"rule", "every tensor a computing graph node read at least once: whole (the whole tensor), rows "
                   "(GET_ROWS: the row ids), experts (an expert kernel: the slices routes.jsonl selects), "
                   "partial (a view of part of it: not counted)"},
          {"tensors", ts}};
}

}  // namespace resid
