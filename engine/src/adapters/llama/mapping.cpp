#include "adapters/llama/mapping.hpp"

#include <sys/mman.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <mutex>

extern "C" {
void* __real_mmap(void* addr, size_t len, int prot, int flags, int fd, off_t off);
int __real_munmap(void* addr, size_t len);
void* __wrap_mmap(void* addr, size_t len, int prot, int flags, int fd, off_t off);
int __wrap_munmap(void* addr, size_t len);
}

namespace resid {
namespace {

enum Mode : int { kOff = 0, kObserve = 1, kSubstitute = 2 };

struct State {
  std::mutex mu;
  int mode = kOff;
  bool tearing_down = false;
  dev_t dev = 0;
  ino_t ino = 0;
  uintptr_t region = 0;
  uint64_t file_bytes = 0;
  uint64_t region_bytes = 0;
  bool handed_out = false;
  MappingReport rep;
};

// Constructed on first use (a wrapped mmap may run before main), never destroyed (one may
// run after main returns).
State& state() {
  static State* s = new State;
  return *s;
}

std::atomic<int> g_mode{kOff};  // fast path: nothing armed, pass everything through

std::string flag_names(int flags) {
  std::string s;
  auto add = [&](int bit, const char* name) {
    if (!(flags & bit)) return;
    if (!s.empty()) s += '|';
    s += name;
  };
  add(MAP_SHARED, "MAP_SHARED");
  add(MAP_PRIVATE, "MAP_PRIVATE");
  add(MAP_FIXED, "MAP_FIXED");
  add(MAP_POPULATE, "MAP_POPULATE");
  add(MAP_NORESERVE, "MAP_NORESERVE");
  return s.empty() ? "0" : s;
}

bool is_model_file(const State& s, int fd) {
  struct stat st{};
  return ::fstat(fd, &st) == 0 && st.st_dev == s.dev && st.st_ino == s.ino;
}

void arm(int mode, dev_t dev, ino_t ino, uintptr_t region, uint64_t file_bytes, uint64_t region_bytes) {
  State& s = state();
  std::lock_guard lk(s.mu);
  s.mode = mode;
  s.tearing_down = false;
  s.dev = dev;
  s.ino = ino;
  s.region = region;
  s.file_bytes = file_bytes;
  s.region_bytes = region_bytes;
  s.handed_out = false;
  s.rep = MappingReport{};
  s.rep.mode = mode == kSubstitute ? "substitute" : "observe";
  g_mode.store(mode, std::memory_order_release);
}

}  // namespace

namespace model_mapping {

void observe(dev_t dev, ino_t ino) { arm(kObserve, dev, ino, 0, 0, 0); }

void substitute(dev_t dev, ino_t ino, void* region, uint64_t file_bytes, uint64_t region_bytes) {
  arm(kSubstitute, dev, ino, reinterpret_cast<uintptr_t>(region), file_bytes, region_bytes);
}

void teardown() {
  State& s = state();
  std::lock_guard lk(s.mu);
  s.tearing_down = true;
}

void disarm() {
  State& s = state();
  std::lock_guard lk(s.mu);
  s.mode = kOff;
  g_mode.store(kOff, std::memory_order_release);
}

MappingReport report() {
  State& s = state();
  std::lock_guard lk(s.mu);
  return s.rep;
}

nlohmann::json to_json(const MappingReport& r) {
  nlohmann::json frags = nlohmann::json::array();
  for (const auto& [a, b] : r.unmapped_fragments) frags.push_back({a, b});
  return {{"mode", r.mode},
          {"interposed", r.interposed},
          {"mmap_calls", r.mmap_calls},
          {"munmap_calls", r.munmap_calls},
          {"requested_flags", r.requested_flags},
          {"populate_ignored", r.populate_ignored},
          {"length", r.length},
          {"unmapped_fragments", frags},
          {"teardown_unmaps", r.teardown_unmaps},
          {"refused", r.refused.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.refused)}};
}

}  // namespace model_mapping
}  // namespace resid

using resid::state;

extern "C" void* __wrap_mmap(void* addr, size_t len, int prot, int flags, int fd, off_t off) {
  const int mode = resid::g_mode.load(std::memory_order_acquire);
  if (mode == resid::kOff || fd < 0) return __real_mmap(addr, len, prot, flags, fd, off);
  auto& s = state();
  std::unique_lock lk(s.mu);
  if (s.mode == resid::kOff || !resid::is_model_file(s, fd)) {
    lk.unlock();
    return __real_mmap(addr, len, prot, flags, fd, off);
  }
  ++s.rep.mmap_calls;
  if (s.rep.requested_flags.empty()) s.rep.requested_flags = resid::flag_names(flags);
  if (s.mode == resid::kObserve) {
    lk.unlock();
    void* p = __real_mmap(addr, len, prot, flags, fd, off);
    lk.lock();
    if (p != MAP_FAILED && s.rep.addr == 0) {
      s.rep.addr = reinterpret_cast<uintptr_t>(p);
      s.rep.length = len;
    }
    return p;
  }
  // Substitute: exactly one read-only mapping of the whole file from offset 0.
  std::string why;
  if (s.tearing_down) why = "a mapping of the model file after teardown";
  else if (s.handed_out) why = "a second mapping of the model file (one is served from the pager region)";
  else if (off != 0) why = "a mapping of the model file at offset " + std::to_string(off) + " (only offset 0 is served)";
  else if (prot & ~PROT_READ) why = "a writable or executable mapping of the model file";
  else if (flags & MAP_FIXED) why = "a MAP_FIXED mapping of the model file";
  else if (len > s.file_bytes) why = "a mapping of " + std::to_string(len) + " bytes, longer than the model file";
  if (!why.empty()) {
    if (s.rep.refused.empty()) s.rep.refused = why;
    errno = EPERM;
    return MAP_FAILED;
  }
  s.handed_out = true;
  s.rep.interposed = true;
  s.rep.addr = s.region;
  s.rep.length = len;
  if (flags & MAP_POPULATE) ++s.rep.populate_ignored;
  return reinterpret_cast<void*>(s.region);
}

extern "C" int __wrap_munmap(void* addr, size_t len) {
  const int mode = resid::g_mode.load(std::memory_order_acquire);
  if (mode == resid::kOff) return __real_munmap(addr, len);
  auto& s = state();
  std::unique_lock lk(s.mu);
  const uintptr_t a = reinterpret_cast<uintptr_t>(addr);
  const uintptr_t base = s.rep.addr;
  const uint64_t span = s.mode == resid::kSubstitute ? s.region_bytes : s.rep.length;
  if (s.mode == resid::kOff || base == 0 || len == 0 || a >= base + span || a + len <= base) {
    lk.unlock();
    return __real_munmap(addr, len);
  }
  ++s.rep.munmap_calls;
  const uint64_t first = a > base ? a - base : 0;
  const uint64_t last = std::min<uint64_t>(a + len - base, span);
  if (s.tearing_down) {
    ++s.rep.teardown_unmaps;
    if (s.mode == resid::kSubstitute) {
      // The region belongs to the pager, which has shut down and frees it in its destructor.
      // Only the part of the request outside the region (none, from llama.cpp) is forwarded.
      lk.unlock();
      int rc = 0;
      if (a < base) rc |= __real_munmap(addr, base - a);
      if (a + len > base + span) rc |= __real_munmap(reinterpret_cast<void*>(base + span), a + len - (base + span));
      return rc;
    }
    lk.unlock();
    return __real_munmap(addr, len);
  }
  s.rep.unmapped_fragments.emplace_back(first, last);
  lk.unlock();
  return __real_munmap(addr, len);
}
