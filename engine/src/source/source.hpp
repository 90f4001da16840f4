// Source: reads extents of one file into windows. Like fio's ioengine table, one interface
// whose every hook's contract is written here once; engines: `buffered` (P: pread through
// the page cache), `direct` (D: blocking O_DIRECT into one window), `uring` (F: io_uring,
// O_DIRECT, N windows, bounded depth), and the fault decorator (source/fault.hpp) that
// wraps any of them. No caller needs to know which engine it holds.
//
// A read's life: submit(extent, tag) puts it in a FREE window (READING); its completion
// comes back from reap() (the window is HOST_READY, its bytes at Completion::data); the
// caller hands the completion back with release() (FREE). Every accepted submit yields
// exactly one completion. A completion that is short, negative, or for an extent outside
// the file or wider than a window is a rejection: it carries a reason and an error and its
// bytes must never be published.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "core/types.hpp"

namespace resid {

struct SourceStats {
  uint64_t reads = 0;           // submitted reads (accepted or rejected)
  uint64_t logical_bytes = 0;   // extent bytes asked for
  uint64_t physical_bytes = 0;  // bytes actually requested from the kernel (aligned span)
  uint64_t padding_bytes = 0;   // physical - logical
  uint64_t rejections = 0;
  uint64_t read_ns = 0;         // time spent inside the read syscalls
  uint64_t completions = 0;     // completions reaped (accepted or rejected)
  uint64_t peak_inflight = 0;   // most reads submitted and not yet completed at once
};

// Why a completion was rejected (machine-readable; `error` says it in words).
// ContentMismatch: the bytes are not what the content digests say the extent holds (the fill
// path checks them, plan/fill.hpp).
enum class RejectReason : uint8_t { None, OutsideFile, TooLarge, Failed, ShortRead, ContentMismatch };

struct Completion {
  uint64_t tag = 0;
  Extent extent;
  int window = -1;
  std::byte* data = nullptr;  // first logical byte inside the window (valid until release)
  std::string error;          // non-empty: rejected
  RejectReason reason = RejectReason::None;
  bool ok() const { return error.empty() && reason == RejectReason::None; }
};

enum class SourceEngine { Buffered, Direct, Uring };
const char* to_string(SourceEngine e);
std::optional<SourceEngine> parse_source_engine(std::string_view s);

class Source {
 public:
  virtual ~Source() = default;

  // ---- identity and geometry (fixed at open) ------------------------------------------
  virtual SourceEngine engine() const = 0;
  virtual uint64_t file_size() const = 0;
  virtual size_t window_count() const = 0;
  // The largest aligned span one read may occupy.
  virtual size_t window_capacity() const = 0;
  // Memory the windows hold (a pager pays it from its budget).
  virtual size_t window_bytes() const = 0;
  // Request alignment of the file's reads (1 without O_DIRECT).
  virtual uint32_t alignment() const = 0;
  // Most reads in flight at once (the blocking engines: 1).
  virtual size_t max_inflight() const = 0;
  // The windows are registered with the kernel (io_uring fixed buffers).
  virtual bool registered_buffers() const = 0;

  // ---- the read path (the owner's thread; nothing here allocates on an accepted read) ----
  // The window the next submit() will use, or -1 when none is free or the depth is reached.
  virtual int free_window() const = 0;
  // Windows FREE now (not reading, not holding a completion).
  virtual size_t windows_free() const = 0;
  // Reads submitted whose completion has not been reaped.
  virtual size_t inflight() const = 0;
  // A hint that the next `reads` submissions are one bundle (published all-or-nothing);
  // engines ignore it, the fault decorator's bundle-extent-failure cell uses it.
  virtual void begin_bundle(uint32_t reads) = 0;
  // Start a read of `e` into free_window(). False when no window is free (reap and release
  // first). A read that cannot even start is still accepted and completes as a rejection,
  // so every accepted submit yields exactly one completion.
  virtual bool submit(const Extent& e, uint64_t tag) = 0;
  // The next completion; with wait=false nullopt when none is ready.
  virtual std::optional<Completion> reap(bool wait) = 0;
  // Return a reaped completion's window to FREE (after its bytes were published or dropped).
  virtual void release(const Completion& c) = 0;
  // Wait for every read in flight; their completions stay reapable.
  virtual void drain() = 0;
  // A descriptor that becomes readable when a completion is ready (an eventfd the engine
  // signals; read it to re-arm), or -1 when completions are ready as soon as submit()
  // returns (the blocking engines). The first call sets it up.
  virtual int completion_fd() = 0;

  virtual SourceStats stats() const = 0;
};

// Opens `path` with the requested engine. No fallback: if O_DIRECT cannot be opened the
// error says so (InputError). `window_capacity` is the largest aligned span one read may
// occupy.
std::unique_ptr<Source> open_source(SourceEngine engine, const std::string& path,
                                    size_t window_capacity);

// Several windows and an in-flight bound (only `uring` has more than one window; asking a
// blocking engine for more is an InputError, never a silent fallback).
struct SourceOptions {
  size_t windows = 1;
  size_t depth = 0;               // most reads in flight; 0 = windows
  bool register_buffers = false;  // uring: io_uring_register_buffers + read_fixed
};
std::unique_ptr<Source> open_source(SourceEngine engine, const std::string& path,
                                    size_t window_capacity, const SourceOptions& opts);
// The options of --windows / --depth after their defaults: 8 windows for uring, 1 for the
// blocking engines; depth = windows.
SourceOptions source_options(SourceEngine engine, std::optional<uint32_t> windows, std::optional<uint32_t> depth);

// --windows / --depth of the subcommands that take them (InputError, naming the flag): the
// blocking engines have one window and depth 1; uring needs 1 <= depth <= windows.
void check_source_flags(SourceEngine engine, std::optional<uint32_t> windows, std::optional<uint32_t> depth);

// The engines' common open: the file read-only (O_DIRECT when `direct`), a regular file, its
// size, and for O_DIRECT the request alignment the filesystem reports (4096 when it does not
// say; 1 without O_DIRECT). InputError (naming --source buffered for a filesystem without
// direct I/O) otherwise; the caller owns fd.
struct SourceFile {
  int fd = -1;
  uint64_t size = 0;
  uint32_t alignment = 1;
};
SourceFile open_source_file(const std::string& path, bool direct);

// submit + reap(wait) for callers that want one blocking read.
Completion read_blocking(Source& src, const Extent& e, uint64_t tag = 0);

}  // namespace resid
