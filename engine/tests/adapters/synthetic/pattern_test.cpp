// The synthetic region pattern of docs/run-contract.md.
#include <gtest/gtest.h>

#include <cstring>

#include "adapters/synthetic/pattern.hpp"

using namespace resid;

TEST(Pattern, MatchesTheContractDefinition) {
  // splitmix64 reference values (seed 0 state 0 -> first output of the standard generator).
  EXPECT_EQ(splitmix64(0), 0xE220A8397B1DCDAFULL);
  EXPECT_EQ(pattern_word(0, 0), splitmix64(0));
  EXPECT_EQ(pattern_word(8, 1), splitmix64(8 ^ kGolden));
  std::vector<std::byte> buf(4096);
  fill_pattern(buf.data(), 8192, buf.size(), 3);
  EXPECT_EQ(verify_pattern(buf.data(), 8192, buf.size(), 3).bad_words, 0u);
  buf[100] = std::byte{static_cast<unsigned char>(static_cast<unsigned char>(buf[100]) ^ 0x10)};
  buf[2000] = std::byte{static_cast<unsigned char>(static_cast<unsigned char>(buf[2000]) ^ 0x01)};
  const VerifyResult r = verify_pattern(buf.data(), 8192, buf.size(), 3);
  EXPECT_EQ(r.bad_words, 2u);
  ASSERT_TRUE(r.first);
  EXPECT_EQ(r.first->offset, 8192u + 100);
  EXPECT_EQ(r.first->actual, r.first->expected ^ 0x10);
  EXPECT_EQ(verify_pattern(buf.data(), 8192, buf.size(), 4).bad_words, 512u);  // wrong seed
}
