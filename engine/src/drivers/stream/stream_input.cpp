#include "drivers/stream/stream_input.hpp"

#include <nlohmann/json.hpp>

#include "core/errors.hpp"
#include "core/fsutil.hpp"

namespace resid {

namespace {

uint64_t get_u64(const nlohmann::json& j, const char* key, const std::string& where) {
  if (!j.contains(key)) throw InputError(where + ": missing \"" + key + "\"");
  const auto& v = j.at(key);
  if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0))
    throw InputError(where + ": \"" + key + "\" is not a non-negative integer");
  return v.get<uint64_t>();
}

uint64_t as_u64(const nlohmann::json& v, const std::string& where) {
  if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0))
    throw InputError(where + " is not a non-negative integer");
  return v.get<uint64_t>();
}

PlanObjectSpec parse_object(const nlohmann::json& o, size_t i) {
  const std::string where = "objects[" + std::to_string(i) + "]";
  if (!o.is_object()) throw InputError(where + " is not an object");
  if (!o.contains("name") || !o.at("name").is_string()) throw InputError(where + ": missing string \"name\"");
  PlanObjectSpec s;
  s.name = o.at("name").get<std::string>();
  const std::string w = where + " ('" + s.name + "')";
  if (o.contains("tensors")) {
    const auto& ts = o.at("tensors");
    if (!ts.is_array()) throw InputError(w + ": \"tensors\" is not a list");
    for (size_t t = 0; t < ts.size(); ++t) {
      const std::string tw = w + ".tensors[" + std::to_string(t) + "]";
      if (!ts[t].is_object()) throw InputError(tw + " is not an object");
      s.extents.push_back({get_u64(ts[t], "offset", tw), get_u64(ts[t], "bytes", tw)});
    }
  } else if (o.contains("extents")) {
    const auto& es = o.at("extents");
    if (!es.is_array()) throw InputError(w + ": \"extents\" is not a list");
    for (size_t e = 0; e < es.size(); ++e) {
      const std::string ew = w + ".extents[" + std::to_string(e) + "]";
      if (es[e].is_object()) {
        s.extents.push_back({get_u64(es[e], "offset", ew), get_u64(es[e], "length", ew)});
      } else if (es[e].is_array() && es[e].size() == 2) {
        s.extents.push_back({as_u64(es[e][0], ew + "[0]"), as_u64(es[e][1], ew + "[1]")});
      } else {
        throw InputError(ew + " is neither {\"offset\", \"length\"} nor [offset, length]");
      }
    }
  } else {
    throw InputError(w + ": needs \"extents\" or \"tensors\"");
  }
  if (o.contains("bytes") && !o.at("bytes").is_null()) s.declared_bytes = as_u64(o.at("bytes"), w + ".bytes");
  return s;
}

}  // namespace

StreamObjects load_objects_json(const std::string& path, uint64_t file_size) {
  const auto text = read_text_file(path);
  if (!text) throw InputError("cannot read manifest " + path);
  return parse_objects_json(*text, path, file_size);
}

StreamObjects parse_objects_json(std::string_view text, const std::string& path, uint64_t file_size) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw InputError("manifest " + path + " is not valid JSON: " + e.what());
  }
  const nlohmann::json* list = &j;
  StreamObjects out;
  if (j.is_object()) {
    if (!j.contains("objects")) throw InputError("manifest " + path + ": missing \"objects\"");
    list = &j.at("objects");
    if (j.contains("file_bytes") && !j.at("file_bytes").is_null()) {
      const uint64_t fb = as_u64(j.at("file_bytes"), "manifest file_bytes");
      if (fb != file_size)
        throw InputError("manifest " + path + " describes a " + std::to_string(fb) + "-byte file; the file has " +
                         std::to_string(file_size));
    }
    const char* order_key = j.contains("step_order") ? "step_order" : (j.contains("order") ? "order" : nullptr);
    if (order_key) {
      const auto& ord = j.at(order_key);
      if (!ord.is_array()) throw InputError(std::string("manifest: \"") + order_key + "\" is not a list");
      for (const auto& n : ord) {
        if (!n.is_string()) throw InputError(std::string("manifest: \"") + order_key + "\" holds a non-string");
        out.order.push_back(n.get<std::string>());
      }
      if (out.order.empty()) throw InputError(std::string("manifest: \"") + order_key + "\" is empty");
    }
  }
  if (!list->is_array()) throw InputError("manifest " + path + ": \"objects\" is not a list");
  try {
    for (size_t i = 0; i < list->size(); ++i) out.objects.push_back(parse_object((*list)[i], i));
  } catch (const nlohmann::json::exception& e) {
    throw InputError("manifest " + path + ": " + e.what());
  }
  return out;
}

StreamObjects tile_objects(uint64_t file_size, uint64_t object_bytes) {
  if (object_bytes == 0) throw InputError("--object-bytes must be positive");
  if (file_size == 0) throw InputError("the file is empty");
  StreamObjects out;
  for (uint64_t off = 0, i = 0; off < file_size; off += object_bytes, ++i) {
    PlanObjectSpec s;
    s.name = "obj." + std::to_string(i);
    s.extents.push_back({off, std::min(object_bytes, file_size - off)});
    out.objects.push_back(std::move(s));
  }
  return out;
}

}  // namespace resid
