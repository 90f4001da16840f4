// SHA-256 (OpenSSL libcrypto's EVP interface) as a lowercase hex string.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace resid {

std::string sha256_hex(const void* data, size_t len);
// Incremental: update() any number of times, then hex() once.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void update(const void* data, size_t len);
  std::string hex();

 private:
  void* ctx_;  // EVP_MD_CTX
};

// Of a whole file, read in 1 MiB blocks; `bytes` (if given) receives its size. RunError when
// it cannot be read.
std::string sha256_file(const std::string& path, uint64_t* bytes = nullptr);

}  // namespace resid
