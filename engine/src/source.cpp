#include "source.hpp"

#include <stdexcept>

#include "errors.hpp"
#include "source_blocking.hpp"
#include "source_uring.hpp"

namespace resid {

const char* to_string(SourceEngine e) {
  switch (e) {
    case SourceEngine::Buffered: return "buffered";
    case SourceEngine::Direct: return "direct";
    case SourceEngine::Uring: return "uring";
  }
  return "?";
}

std::optional<SourceEngine> parse_source_engine(std::string_view s) {
  if (s == "buffered") return SourceEngine::Buffered;
  if (s == "direct") return SourceEngine::Direct;
  if (s == "uring") return SourceEngine::Uring;
  return std::nullopt;
}

std::unique_ptr<Source> open_source(SourceEngine engine, const std::string& path,
                                    size_t window_capacity) {
  if (engine == SourceEngine::Uring) return open_source(engine, path, window_capacity, SourceOptions{});
  return std::make_unique<BlockingSource>(engine, path, window_capacity);
}

std::unique_ptr<Source> open_source(SourceEngine engine, const std::string& path,
                                    size_t window_capacity, const SourceOptions& opts) {
  if (engine == SourceEngine::Uring) return std::make_unique<UringSource>(path, window_capacity, opts);
  if (opts.windows != 1 || (opts.depth != 0 && opts.depth != 1) || opts.register_buffers)
    throw InputError(std::string("the ") + to_string(engine) +
                     " source engine has one window and depth 1 (no registered buffers)");
  return std::make_unique<BlockingSource>(engine, path, window_capacity);
}

Completion read_blocking(Source& src, const Extent& e, uint64_t tag) {
  if (!src.submit(e, tag)) throw std::logic_error("read_blocking: no free window");
  auto c = src.reap(true);
  if (!c) throw std::logic_error("read_blocking: submitted read produced no completion");
  return std::move(*c);
}

}  // namespace resid
