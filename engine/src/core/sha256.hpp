// SHA-256 (OpenSSL libcrypto's EVP interface) as a lowercase hex string.
#pragma once

#include <cstddef>
#include <string>

namespace resid {

std::string sha256_hex(const void* data, size_t len);

}  // namespace resid
