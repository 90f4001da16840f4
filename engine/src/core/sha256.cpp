#include "core/sha256.hpp"

#include <openssl/evp.h>

#include <stdexcept>

namespace resid {

std::string sha256_hex(const void* data, size_t len) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (EVP_Digest(data, len, md, &n, EVP_sha256(), nullptr) != 1 || n != 32)
    throw std::runtime_error("EVP_Digest(sha256) failed");
  static const char* hex = "0123456789abcdef";
  std::string out(64, '0');
  for (unsigned i = 0; i < 32; ++i) {
    out[2 * i] = hex[md[i] >> 4];
    out[2 * i + 1] = hex[md[i] & 15];
  }
  return out;
}

}  // namespace resid
