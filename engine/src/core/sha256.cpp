#include "core/sha256.hpp"

#include <openssl/evp.h>

#include <cerrno>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <vector>

#include "core/errors.hpp"

namespace resid {

namespace {

std::string hex_of(const unsigned char* md) {
  static const char* hex = "0123456789abcdef";
  std::string out(64, '0');
  for (unsigned i = 0; i < 32; ++i) {
    out[2 * i] = hex[md[i] >> 4];
    out[2 * i + 1] = hex[md[i] & 15];
  }
  return out;
}

}  // namespace

std::string sha256_hex(const void* data, size_t len) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (EVP_Digest(data, len, md, &n, EVP_sha256(), nullptr) != 1 || n != 32)
    throw std::runtime_error("EVP_Digest(sha256) failed");
  return hex_of(md);
}

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  if (!ctx_ || EVP_DigestInit_ex(static_cast<EVP_MD_CTX*>(ctx_), EVP_sha256(), nullptr) != 1)
    throw std::runtime_error("EVP sha256 init failed");
}

Sha256::~Sha256() { EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(ctx_)); }

void Sha256::update(const void* data, size_t len) {
  if (EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(ctx_), data, len) != 1) throw std::runtime_error("EVP sha256 update failed");
}

std::string Sha256::hex() {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(ctx_), md, &len) != 1 || len != 32)
    throw std::runtime_error("EVP sha256 final failed");
  return hex_of(md);
}

std::string sha256_file(const std::string& path, uint64_t* bytes) {
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) throw RunError("cannot read " + path + " (" + errno_name(errno) + ")");
  Sha256 h;
  std::vector<unsigned char> buf(1 << 20);
  uint64_t total = 0;
  for (;;) {
    const size_t n = std::fread(buf.data(), 1, buf.size(), f.get());
    h.update(buf.data(), n);
    total += n;
    if (n < buf.size()) break;
  }
  if (std::ferror(f.get())) throw RunError("cannot read " + path);
  if (bytes) *bytes = total;
  return h.hex();
}

}  // namespace resid
