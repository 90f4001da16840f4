#include "source/source.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <stdexcept>

#include "core/errors.hpp"
#include "source/blocking.hpp"
#include "source/dio_align.hpp"
#include "source/uring.hpp"

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

SourceFile open_source_file(const std::string& path, bool direct) {
  SourceFile f;
  f.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | (direct ? O_DIRECT : 0));
  if (f.fd < 0) {
    const int e = errno;
    if (direct && e == EINVAL)
      throw InputError("cannot open " + path + " with O_DIRECT (EINVAL): the filesystem does not "
                       "support direct I/O; use --source buffered or put the file elsewhere");
    throw InputError("cannot open " + path + " (" + errno_name(e) + ")");
  }
  struct stat st{};
  if (::fstat(f.fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(f.fd);
    throw InputError("not a regular file: " + path);
  }
  f.size = static_cast<uint64_t>(st.st_size);
  // The buffered source reads what its caller asks for through the page cache, without the
  // kernel's read-ahead around it (8 MiB on the development machine's virtual disk, where one
  // miss brought most of a small model into the cache): its page cache holds the bytes the
  // workload demanded. Recorded in run.json (source_stats.page_cache_readahead).
  if (!direct) (void)::posix_fadvise(f.fd, 0, 0, POSIX_FADV_RANDOM);
  if (direct) {
    // Use what the filesystem reports; 4096 is safe for every block size up to the page.
    const uint32_t a = dio_offset_alignment(f.fd);
    f.alignment = a ? a : 4096;
  }
  return f;
}

void check_source_flags(SourceEngine engine, std::optional<uint32_t> windows, std::optional<uint32_t> depth) {
  if (engine != SourceEngine::Uring) {
    if ((windows && *windows != 1) || (depth && *depth != 1))
      throw InputError(std::string("--source ") + to_string(engine) + " has one window and depth 1 (--windows " +
                       std::to_string(windows.value_or(1)) + " --depth " + std::to_string(depth.value_or(1)) +
                       " asked); only --source uring takes more");
    return;
  }
  const uint32_t w = windows.value_or(8), d = depth.value_or(w);
  if (w == 0 || d == 0) throw InputError("--windows and --depth must be positive");
  if (d > w)
    throw InputError("--depth " + std::to_string(d) + " exceeds --windows " + std::to_string(w) +
                     " (a read in flight holds a window)");
  if (w > 4096) throw InputError("--windows " + std::to_string(w) + " is more than 4096");
}

SourceOptions source_options(SourceEngine engine, std::optional<uint32_t> windows, std::optional<uint32_t> depth) {
  SourceOptions so;
  so.windows = windows.value_or(engine == SourceEngine::Uring ? 8 : 1);
  so.depth = depth.value_or(static_cast<uint32_t>(so.windows));
  return so;
}

Completion read_blocking(Source& src, const Extent& e, uint64_t tag) {
  if (!src.submit(e, tag)) throw std::logic_error("read_blocking: no free window");
  auto c = src.reap(true);
  if (!c) throw std::logic_error("read_blocking: submitted read produced no completion");
  return std::move(*c);
}

}  // namespace resid
