#include "drivers/stream/stream_verify.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>

#include "adapters/synthetic/pattern.hpp"
#include "core/checksum.hpp"
#include "core/errors.hpp"

namespace resid {

namespace {

// Reads [off, off + want) of fd into buf, whole (RunError naming the offset otherwise).
void read_exactly(int fd, const std::string& path, std::byte* buf, uint64_t want, uint64_t off) {
  uint64_t got = 0;
  while (got < want) {
    const ssize_t n = ::pread(fd, buf + got, want - got, static_cast<off_t>(off + got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : 0;
      ::close(fd);
      throw RunError("reference read of " + path + " at " + std::to_string(off + got) +
                     (n < 0 ? " failed (" + errno_name(err) + ")" : " hit the end of the file"));
    }
    got += static_cast<uint64_t>(n);
  }
}

// One object's checksum from the file (buf: a multiple of kChecksumBlock bytes).
uint64_t object_checksum(int fd, const std::string& path, const PlanManifest& m, uint32_t oi, std::vector<std::byte>& buf) {
  const PlanObject& o = m.object(oi);
  uint64_t sum = 0;
  for (uint32_t x = o.first_extent; x < o.first_extent + o.extents; ++x) {
    const PlanExtent& e = m.extents()[x];
    for (uint64_t off = 0; off < e.length; off += buf.size()) {
      const uint64_t want = std::min<uint64_t>(buf.size(), e.length - off);
      read_exactly(fd, path, buf.data(), want, e.offset + off);
      for (uint64_t b = 0; b < want; b += kChecksumBlock)
        sum += hash64(buf.data() + b, std::min(kChecksumBlock, want - b), e.offset + off + b);
    }
  }
  return sum;
}

}  // namespace

std::vector<uint64_t> file_checksums(const std::string& path, const PlanManifest& m, const std::vector<bool>& needed) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw InputError("cannot open " + path + " (" + errno_name(errno) + ")");
  std::vector<std::byte> buf(16 * kChecksumBlock);
  std::vector<uint64_t> ref(m.object_count(), 0);
  for (uint32_t oi = 0; oi < m.object_count(); ++oi)
    if (needed[oi]) ref[oi] = object_checksum(fd, path, m, oi, buf);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);  // a buffered arm must start cold
  ::close(fd);
  return ref;
}

// The same checksums from the `mkregion` pattern (docs/run-contract.md) without reading the
// file: an independent oracle, and no read warms any cache before the timed stream.
std::vector<uint64_t> pattern_checksums(const PlanManifest& m, const std::vector<bool>& needed, uint64_t seed) {
  std::vector<std::byte> buf(kChecksumBlock + 16);
  std::vector<uint64_t> ref(m.object_count(), 0);
  for (uint32_t oi = 0; oi < m.object_count(); ++oi) {
    if (!needed[oi]) continue;
    const PlanObject& o = m.object(oi);
    uint64_t sum = 0;
    for (uint32_t x = o.first_extent; x < o.first_extent + o.extents; ++x) {
      const PlanExtent& e = m.extents()[x];
      for (uint64_t off = 0; off < e.length; off += kChecksumBlock) {
        const uint64_t at = e.offset + off, len = std::min(kChecksumBlock, e.length - off);
        const uint64_t a = at / 8 * 8;
        fill_pattern(buf.data(), a, (at + len - a + 7) / 8 * 8, seed);
        sum += hash64(buf.data() + (at - a), len, at);
      }
    }
    ref[oi] = sum;
  }
  return ref;
}

// The blocks of `object` consumer `me` of `n` hashes, read from the slot.
uint64_t consumer_partial(const PlanManifest& m, uint32_t object, const std::byte* slot, uint32_t me, uint32_t n) {
  const PlanObject& o = m.object(object);
  uint64_t sum = 0, j = 0;
  for (uint32_t x = o.first_extent; x < o.first_extent + o.extents; ++x) {
    const PlanExtent& e = m.extents()[x];
    for (uint64_t off = 0; off < e.length; off += kChecksumBlock, ++j) {
      if (j % n != me) continue;
      sum += hash64(slot + e.slot_offset + off, std::min(kChecksumBlock, e.length - off), e.offset + off);
    }
  }
  return sum;
}

}  // namespace resid
