#include "drivers/content_digests.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <fstream>
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
  nlohmann::json j;
  try {
    std::ifstream in(path);
    if (!in) throw InputError("--content-digests " + path + " cannot be read");
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw InputError("--content-digests " + path + " is not JSON (" + e.what() + ")");
  }
  const uint64_t cs = j.value("chunk_size", uint64_t{0}), bytes = j.value("bytes", uint64_t{0});
  if (cs != chunk_size || bytes != file_bytes)
    throw InputError("--content-digests " + path + " was made for chunk size " + std::to_string(cs) + " of a " +
                     std::to_string(bytes) + "-byte file; this run reads chunks of " + std::to_string(chunk_size) +
                     " of a " + std::to_string(file_bytes) + "-byte file");
  const auto& list = j.at("chunks");
  if (!list.is_array() || list.size() != (file_bytes + chunk_size - 1) / chunk_size)
    throw InputError("--content-digests " + path + " does not list one digest per chunk");
  std::vector<uint64_t> out;
  out.reserve(list.size());
  for (const auto& h : list) out.push_back(std::stoull(h.get<std::string>(), nullptr, 16));
  return out;
}

}  // namespace resid
