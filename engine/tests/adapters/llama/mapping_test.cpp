// The model-mapping interposition (src/model_mapping.cpp), linked with
// -Wl,--wrap=mmap,--wrap=munmap like residctl: the mmap/munmap calls in this file go through
// the wrappers exactly as llama-mmap.o's do.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <string>

#include "adapters/llama/mapping.hpp"
#include "util/test_util.hpp"

using namespace resid;

namespace {

constexpr size_t kPage = 4096;

struct File {
  std::string path;
  int fd = -1;
  struct stat st{};
  File(const std::string& p, size_t bytes) : path(p) {
    std::ofstream(p, std::ios::binary) << std::string(bytes, 'm');
    fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
    ::fstat(fd, &st);
  }
  ~File() { ::close(fd); }
};

bool mapped(const void* p, size_t len) {
  unsigned char v[64];
  return ::mincore(const_cast<void*>(p), len, v) == 0 || errno != ENOMEM;
}

}  // namespace

TEST(ModelMapping, OffPassesEverythingThrough) {
  test::TempDir dir;
  File f(dir.file("m.gguf"), 8 * kPage);
  model_mapping::disarm();
  void* p = ::mmap(nullptr, 8 * kPage, PROT_READ, MAP_SHARED, f.fd, 0);
  ASSERT_NE(p, MAP_FAILED);
  EXPECT_EQ(static_cast<const char*>(p)[100], 'm');
  EXPECT_EQ(::munmap(p, 8 * kPage), 0);
}

TEST(ModelMapping, ObserveRecordsTheKernelMappingAndItsTrims) {
  test::TempDir dir;
  File f(dir.file("m.gguf"), 8 * kPage + 100);
  File other(dir.file("other.bin"), 2 * kPage);
  model_mapping::observe(f.st.st_dev, f.st.st_ino);
  const size_t len = 8 * kPage + 100;
  void* p = ::mmap(nullptr, len, PROT_READ, MAP_SHARED | MAP_POPULATE, f.fd, 0);
  ASSERT_NE(p, MAP_FAILED);
  void* q = ::mmap(nullptr, 2 * kPage, PROT_READ, MAP_SHARED, other.fd, 0);  // not the model
  ASSERT_NE(q, MAP_FAILED);
  EXPECT_EQ(::munmap(q, 2 * kPage), 0);
  auto* b = static_cast<char*>(p);
  EXPECT_EQ(::munmap(b, 2 * kPage), 0);  // the header
  model_mapping::teardown();
  EXPECT_EQ(::munmap(b + 2 * kPage, len - 2 * kPage), 0);
  model_mapping::disarm();
  const auto r = model_mapping::report();
  EXPECT_EQ(r.mode, "observe");
  EXPECT_FALSE(r.interposed);
  EXPECT_EQ(r.mmap_calls, 1u);
  EXPECT_EQ(r.addr, reinterpret_cast<uintptr_t>(p));
  EXPECT_EQ(r.length, len);
  EXPECT_EQ(r.requested_flags, "MAP_SHARED|MAP_POPULATE");
  ASSERT_EQ(r.unmapped_fragments.size(), 1u);
  EXPECT_EQ(r.unmapped_fragments[0], (std::pair<uint64_t, uint64_t>(0, 2 * kPage)));
  EXPECT_EQ(r.teardown_unmaps, 1u);
  EXPECT_EQ(r.munmap_calls, 2u);
  EXPECT_FALSE(mapped(b + 4 * kPage, kPage));
}

TEST(ModelMapping, SubstituteAnswersWithTheRegion) {
  test::TempDir dir;
  const size_t file_bytes = 16 * kPage - 1000, region_bytes = 16 * kPage;
  File f(dir.file("m.gguf"), file_bytes);
  File other(dir.file("other.bin"), 2 * kPage);
  void* region = ::mmap(nullptr, region_bytes, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(region, MAP_FAILED);
  model_mapping::substitute(f.st.st_dev, f.st.st_ino, region, file_bytes, region_bytes);

  // Anonymous memory and other files are not touched.
  void* anon = ::mmap(nullptr, kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(anon, MAP_FAILED);
  EXPECT_NE(anon, region);
  EXPECT_EQ(::munmap(anon, kPage), 0);
  void* q = ::mmap(nullptr, 2 * kPage, PROT_READ, MAP_SHARED, other.fd, 0);
  ASSERT_NE(q, MAP_FAILED);
  EXPECT_NE(q, region);
  EXPECT_EQ(::munmap(q, 2 * kPage), 0);

  // Writable, offset and MAP_FIXED mappings of the model are refused, never passed through.
  errno = 0;
  EXPECT_EQ(::mmap(nullptr, file_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, f.fd, 0), MAP_FAILED);
  EXPECT_EQ(errno, EPERM);
  EXPECT_EQ(::mmap(nullptr, kPage, PROT_READ, MAP_SHARED, f.fd, kPage), MAP_FAILED);

  // llama.cpp's mapping: read-only, MAP_SHARED|MAP_POPULATE, offset 0, the file's size.
  void* p = ::mmap(nullptr, file_bytes, PROT_READ, MAP_SHARED | MAP_POPULATE, f.fd, 0);
  ASSERT_EQ(p, region);
  // A second one is refused.
  EXPECT_EQ(::mmap(nullptr, file_bytes, PROT_READ, MAP_SHARED, f.fd, 0), MAP_FAILED);

  auto* b = static_cast<char*>(region);
  // Trimming the header goes to the kernel (the pager would see UFFD_EVENT_UNMAP).
  EXPECT_EQ(::munmap(b, 3 * kPage), 0);
  EXPECT_FALSE(mapped(b, kPage));
  EXPECT_TRUE(mapped(b + 3 * kPage, kPage));

  // Model free after the pager shut down: left to the pager's teardown, the region stays.
  model_mapping::teardown();
  EXPECT_EQ(::munmap(b + 3 * kPage, file_bytes - 3 * kPage), 0);
  EXPECT_TRUE(mapped(b + 3 * kPage, kPage));
  model_mapping::disarm();

  const auto r = model_mapping::report();
  EXPECT_EQ(r.mode, "substitute");
  EXPECT_TRUE(r.interposed);
  EXPECT_EQ(r.addr, reinterpret_cast<uintptr_t>(region));
  EXPECT_EQ(r.length, file_bytes);
  EXPECT_EQ(r.mmap_calls, 4u);
  EXPECT_EQ(r.populate_ignored, 1u);
  EXPECT_FALSE(r.refused.empty());
  ASSERT_EQ(r.unmapped_fragments.size(), 1u);
  EXPECT_EQ(r.unmapped_fragments[0], (std::pair<uint64_t, uint64_t>(0, 3 * kPage)));
  EXPECT_EQ(r.teardown_unmaps, 1u);
  const auto j = model_mapping::to_json(r);
  EXPECT_EQ(j["interposed"], true);
  EXPECT_EQ(j["unmapped_fragments"][0][1], 3 * kPage);

  // Disarmed: the owner frees what is left.
  EXPECT_EQ(::munmap(b + 3 * kPage, region_bytes - 3 * kPage), 0);
  EXPECT_FALSE(mapped(b + 3 * kPage, kPage));
}
