#include "drivers/record.hpp"

namespace resid {

namespace {

nlohmann::json extent_json(const Extent& e) { return {{"offset", e.offset}, {"length", e.length}}; }

}  // namespace

nlohmann::json fault_json(const FaultSpec& spec, const FaultReport* r) {
  if (!spec.active()) return nullptr;
  nlohmann::json j = {{"cell", to_string(spec.cell)}, {"at", spec.at}, {"class", fault_class(spec.cell)},
                      {"fired", r ? r->fired : false}};
  if (!r) return j;
  const bool f = r->fired;
  j["read"] = f ? nlohmann::json(r->read) : nlohmann::json(nullptr);
  j["window"] = f && r->window >= 0 ? nlohmann::json(r->window) : nlohmann::json(nullptr);
  j["tag"] = f ? nlohmann::json(r->tag) : nlohmann::json(nullptr);
  j["presented_tag"] = f ? nlohmann::json(r->presented_tag) : nlohmann::json(nullptr);
  j["extent"] = f ? extent_json(r->extent) : nlohmann::json(nullptr);
  j["delivered"] = f ? extent_json(r->delivered) : nlohmann::json(nullptr);
  j["reordered"] = r->reordered;
  j["withheld"] = r->withheld;
  return j;
}

}  // namespace resid
