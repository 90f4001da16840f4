#include "drivers/common/content_digests.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "core/checksum.hpp"
#include "core/errors.hpp"
#include "core/fsutil.hpp"
#include "core/sha256.hpp"

namespace resid {

namespace {

std::string hex16(uint64_t v) {
  char b[17];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(v));
  return b;
}

// Reads up to len bytes at off (short only at the end of the file).
size_t read_at(int fd, const std::string& path, char* buf, size_t len, uint64_t off) {
  size_t got = 0;
  while (got < len) {
    const ssize_t n = ::pread(fd, buf + got, len - got, static_cast<off_t>(off + got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw RunError("cannot read " + path + " (" + errno_name(errno) + ")");
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  return got;
}

}  // namespace

int run_inventory(const std::string& file, uint64_t chunk_size, const std::string& out) {
  if (chunk_size == 0 || chunk_size % 4096 != 0)
    throw InputError("--chunk-size " + std::to_string(chunk_size) + " is not a positive multiple of 4096");
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw InputError("cannot open " + file + " (" + errno_name(errno) + ")");
  std::vector<char> buf(chunk_size);
  Sha256 whole;
  nlohmann::json chunks = nlohmann::json::array();
  uint64_t bytes = 0;
  for (;;) {
    const size_t n = read_at(fd, file, buf.data(), buf.size(), bytes);
    if (n == 0) break;
    whole.update(buf.data(), n);
    chunks.push_back(hex16(hash64(reinterpret_cast<const std::byte*>(buf.data()), n, 0)));
    bytes += n;
    if (n < buf.size()) break;
  }
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);  // a run after this one starts cold
  ::close(fd);
  if (bytes == 0) throw InputError(file + " is empty");
  const nlohmann::json j = {{"schema_version", 1}, {"file", file}, {"bytes", bytes}, {"sha256", whole.hex()},
                            {"chunk_size", chunk_size}, {"hash", "xxh64, seed 0, per chunk"}, {"chunks", chunks}};
  write_file_atomic(out, j.dump(1) + "\n");
  return 0;
}

std::vector<uint64_t> load_chunk_digests(const std::string& path, uint64_t file_bytes, uint64_t chunk_size) {
  const auto text = read_text_file(path);
  if (!text) throw InputError("--content-digests " + path + " cannot be read");
  return parse_chunk_digests(*text, path, file_bytes, chunk_size);
}

std::vector<uint64_t> parse_chunk_digests(std::string_view text, const std::string& path, uint64_t file_bytes,
                                          uint64_t chunk_size) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw InputError("--content-digests " + path + " is not JSON (" + e.what() + ")");
  }
  if (!j.is_object()) throw InputError("--content-digests " + path + " is not a digests file (not a JSON object)");
  const auto u64 = [&](const char* key) {
    const auto it = j.find(key);
    return it != j.end() && it->is_number_unsigned() ? it->get<uint64_t>() : uint64_t{0};
  };
  const uint64_t cs = u64("chunk_size"), bytes = u64("bytes");
  if (cs != chunk_size || bytes != file_bytes)
    throw InputError("--content-digests " + path + " was made for chunk size " + std::to_string(cs) + " of a " +
                     std::to_string(bytes) + "-byte file; this run reads chunks of " + std::to_string(chunk_size) +
                     " of a " + std::to_string(file_bytes) + "-byte file");
  const auto list = j.find("chunks");
  if (list == j.end() || !list->is_array() || list->size() != (file_bytes + chunk_size - 1) / chunk_size)
    throw InputError("--content-digests " + path + " does not list one digest per chunk");
  std::vector<uint64_t> out;
  out.reserve(list->size());
  for (const auto& h : *list) {
    // What inventory writes: 16 hex digits (fewer are accepted, as before; nothing else is).
    const std::string* s = h.is_string() ? h.get_ptr<const std::string*>() : nullptr;
    uint64_t v = 0;
    const auto [end, ec] = s ? std::from_chars(s->data(), s->data() + s->size(), v, 16) : std::from_chars_result{};
    if (!s || s->empty() || s->size() > 16 || ec != std::errc() || end != s->data() + s->size())
      throw InputError("--content-digests " + path + ": chunk " + std::to_string(out.size()) +
                       "'s digest is not a hex string of at most 16 digits");
    out.push_back(v);
  }
  return out;
}

}  // namespace resid
