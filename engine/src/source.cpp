#include "source.hpp"

#include <stdexcept>

#include "source_blocking.hpp"

namespace resid {

const char* to_string(SourceEngine e) {
  switch (e) {
    case SourceEngine::Buffered: return "buffered";
    case SourceEngine::Direct: return "direct";
  }
  return "?";
}

std::optional<SourceEngine> parse_source_engine(std::string_view s) {
  if (s == "buffered") return SourceEngine::Buffered;
  if (s == "direct") return SourceEngine::Direct;
  return std::nullopt;
}

std::unique_ptr<Source> open_source(SourceEngine engine, const std::string& path,
                                    size_t window_capacity) {
  return std::make_unique<BlockingSource>(engine, path, window_capacity);
}

Completion read_blocking(Source& src, const Extent& e, uint64_t tag) {
  if (!src.submit(e, tag)) throw std::logic_error("read_blocking: no free window");
  auto c = src.reap(true);
  if (!c) throw std::logic_error("read_blocking: submitted read produced no completion");
  return std::move(*c);
}

}  // namespace resid
