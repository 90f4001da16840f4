// Content identity of a file, chunk by chunk (docs/design.md; docs/run-contract.md,
// "Content digests"): `residctl inventory` reads the file once and writes, per chunk of
// --chunk-size, the XXH64 (seed 0) of its bytes, and the sha256 of the whole file. A pager
// run given them with --content-digests checks every fill against its chunk's digest before
// it is published; a mismatch is a rejection that fails the run closed, naming the chunk,
// its extent and both digests.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace resid {

// `residctl inventory --file F --chunk-size C --out D`; returns the exit status.
int run_inventory(const std::string& file, uint64_t chunk_size, const std::string& out);

// The digests of `path`'s chunks. InputError (naming the file and what differs) when the
// digests were made for another chunk size, another file size or are malformed.
std::vector<uint64_t> load_chunk_digests(const std::string& path, uint64_t file_bytes, uint64_t chunk_size);

// The parse behind load_chunk_digests, on the file's text (no I/O; `path` only names it in
// messages). Contract: for chunk_size > 0, returns one digest per chunk of a file_bytes-byte
// file, or throws InputError naming `path`; no other exception, whatever the text.
std::vector<uint64_t> parse_chunk_digests(std::string_view text, const std::string& path, uint64_t file_bytes,
                                          uint64_t chunk_size);

}  // namespace resid
