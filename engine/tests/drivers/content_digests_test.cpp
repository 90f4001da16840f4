// parse_chunk_digests (--content-digests): a file that is not what `residctl inventory`
// writes is bad input (InputError, exit 2), never another exception (exit 1, a "failed run").
// The malformed cases are what the content_digests fuzz target found (engine/fuzz/).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "core/errors.hpp"
#include "drivers/common/content_digests.hpp"

namespace resid {
namespace {

using nlohmann::json;

constexpr uint64_t kChunk = 65536, kBytes = 2 * 65536 + 10;  // three chunks

json good() {
  return {{"schema_version", 1}, {"bytes", kBytes}, {"chunk_size", kChunk},
          {"chunks", {"0123456789abcdef", "fedcba9876543210", "00000000000000ff"}}};
}

std::vector<uint64_t> parse(const std::string& text) { return parse_chunk_digests(text, "d.json", kBytes, kChunk); }

TEST(ContentDigests, WhatInventoryWritesParses) {
  EXPECT_EQ(parse(good().dump()), (std::vector<uint64_t>{0x0123456789abcdefull, 0xfedcba9876543210ull, 0xffull}));
}

TEST(ContentDigests, MalformedFilesAreInputErrors) {
  std::vector<std::string> bad = {"", "[]", "\"x\"", "{\"bytes\": 131082, \"chunk_size\": 65536}"};
  for (const json& digest : {json("zz"), json("12zz"), json("0x12"), json("-1"), json(" 12"), json(""),
                             json("0123456789abcdef0"), json(12), json(nullptr), json::array()}) {
    json j = good();
    j["chunks"][1] = digest;
    bad.push_back(j.dump());
  }
  json j = good();
  j["chunks"] = "0123";
  bad.push_back(j.dump());
  j = good();
  j["chunk_size"] = 65536.5;
  bad.push_back(j.dump());
  j = good();
  j["bytes"] = "131082";
  bad.push_back(j.dump());
  for (const auto& text : bad) {
    try {
      parse(text);
      ADD_FAILURE() << "accepted: " << text;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("d.json"), std::string::npos) << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "not an InputError for " << text << ": " << e.what();
    }
  }
}

}  // namespace
}  // namespace resid
