// Region: the pager's address range and everything the kernel does to it.
//
// Contract. The region is an anonymous private mapping of the file size rounded up to
// chunks, 2 MiB aligned, its file pages registered with the userfaultfd in MISSING mode.
// Only the Region changes what the kernel holds there, only on the pager thread, and only
// in pages the application has not unmapped (the books' hole map): a fill lands with
// UFFDIO_COPY (DONTWAKE) or, in `move` mode, UFFDIO_MOVE from its window, then
// MADV_COLLAPSE in `collapse` mode; an eviction discards with MADV_DONTNEED (_LOCKED with
// --protect), or in `move` mode gives a chunk that came in by a whole move back to an empty
// window (below); waiters are woken with UFFDIO_WAKE once the books show the fill. At the close
// PROT_NONE comes before UFFDIO_UNREGISTER (a waiter woken by the unregister faults instead
// of reading a zero page); the destructor unmaps what is still ours. The geometry never
// changes after construction and may be read from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "pager/shared.hpp"
#include "pager/uffd.hpp"
#include "source/source.hpp"

namespace resid {

class Region {
 public:
  struct Geometry {
    uint64_t page = 4096;
    uint64_t file_bytes = 0;
    uint64_t registered_bytes = 0;  // page-rounded file size
    uint64_t mapped_bytes = 0;      // chunks * chunk_size
    uint64_t chunk_pages = 0;
    uint32_t chunks = 0;
    uint32_t windows = 1;  // the source's windows (the most a `move` fill can empty)
  };
  // The chunks of the source's file under cfg, checked (InputError for what a caller can
  // get wrong).
  static Geometry geometry(const PagerConfig& cfg, const Source& source);

  // Checks the huge-chunk mode, opens the userfaultfd, maps and registers the region, and
  // sizes the books over its pages.
  Region(PagerShared& sh, const Geometry& g);
  ~Region();
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;
  // What a COPY into a changing address space calls to read the pending unmap events.
  void set_event_reader(std::function<void()> read_events) { read_events_ = std::move(read_events); }

  const Geometry& geometry() const { return g_; }
  std::byte* base() const { return base_; }
  uint32_t chunks() const { return g_.chunks; }
  int uffd() const { return uffd_.fd(); }
  UffdMode uffd_mode() const { return uffd_.mode(); }
  // Bytes of chunk c that hold file data, page rounded (the tail chunk may be short).
  uint64_t chunk_length(ChunkId c) const;
  uint64_t first_page(ChunkId c) const { return c * g_.chunk_pages; }
  uint64_t pages_in(ChunkId c) const { return chunk_length(c) / g_.page; }
  // Whether a fault address lies in the file's pages, and its chunk.
  bool holds(uintptr_t addr) const;
  ChunkId chunk_of(uintptr_t addr) const;

  // Lands chunk c's bytes (data_len of them read, the rest zeroed by the caller): MOVE when
  // the mode and the chunk allow it, else COPY. False: the pager failed (the message is set).
  bool publish(ChunkId c, const std::byte* data, uint64_t data_len);
  // `collapse` mode: MADV_COLLAPSE of a whole, fully mapped chunk (counted).
  void maybe_collapse(ChunkId c);
  // Evicts chunk c's mapped pages (under mu: no consumer can enter meanwhile): recycled into
  // an empty window when it can be (below), else MADV_DONTNEED.
  void discard(ChunkId c);
  void wake_chunk(ChunkId c);
  void wake_range(uintptr_t lo, uintptr_t hi);
  // An application munmap of [start, end) (UFFD_EVENT_UNMAP): the books drop its pages and
  // any chunk left without one. Returns the part inside the region (empty: lo >= hi).
  std::pair<uintptr_t, uintptr_t> book_unmap(uintptr_t start, uintptr_t end);
  // The eager check of the books against the kernel and the Plan (under mu).
  void reconcile_locked();
  // PROT_NONE, then UFFDIO_UNREGISTER, over our own pages; then release_windows().
  void finish_registration();
  // `move` mode recycling. A whole move empties its window, which the kernel would refill
  // inside the next read into it with a fresh huge page it allocates and zeroes (a quarter of
  // that read's time, docs/run-contract.md). So an eviction of a chunk that came in by a
  // whole move moves its huge page back into an empty window (UFFDIO_MOVE, chunk -> window)
  // instead of freeing it; the next read overwrites it. UFFDIO_MOVE's destination must be
  // registered with this userfaultfd: a window is registered, in write-protect mode with no
  // page ever protected (so a read into it while empty still faults in the kernel, never to
  // the pager), when a fill is first moved out of it. "Empty" is a hint kept on the pager
  // thread (set by a move out, cleared by a recycle or a copy out) and checked with mincore
  // before the move, since with several windows a read may have refilled one meanwhile; one
  // refilled between the check and the move refuses it (EEXIST) and the eviction discards
  // instead. The windows must be unregistered before the source unmaps them (an unmap of a
  // registered range waits for the fault loop to read its event): release_windows(), called
  // at the close and by the Pager's destructor, once no fill or eviction runs; idempotent.
  void release_windows();
  // Sum of an smaps field (kB) over the region's mappings, in bytes; nullopt if unreadable.
  std::optional<uint64_t> smaps_bytes(const char* field) const;

 private:
  void check_huge_support() const;
  void open_userfaultfd();
  void map_region();
  void register_region();
  std::pair<uint64_t, int> move_pages(std::byte* dst, const std::byte* src, uint64_t len);
  struct Spare {  // a window a whole move emptied
    std::byte* addr = nullptr;
    bool registered = false;
    bool empty = false;
  };
  Spare* spare_of_locked(const std::byte* data);
  void note_moved_out_locked(const std::byte* window);
  bool recycle_locked(ChunkId c);
  bool copy_pages(ChunkId c, const std::byte* data, uint64_t from_page);

  PagerShared& sh_;
  const Geometry g_;
  Uffd uffd_;
  std::byte* base_ = nullptr;
  std::function<void()> read_events_;
  std::vector<Spare> spares_;         // reserved to geometry().windows: the read path never allocates
  std::vector<uint8_t> moved_whole_;  // per chunk: its pages came in by one whole move
};

}  // namespace resid
