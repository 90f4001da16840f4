#include "core/mincore.hpp"

#include <sys/mman.h>
#include <unistd.h>

namespace resid {

PageCount count_resident(const void* addr, size_t len, std::vector<unsigned char>& scratch) {
  static const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  PageCount pc;
  pc.pages = (len + page - 1) / page;
  if (scratch.size() < pc.pages) scratch.resize(pc.pages);
  if (pc.pages == 0) {
    pc.ok = true;
    return pc;
  }
  if (::mincore(const_cast<void*>(addr), len, scratch.data()) != 0) return pc;
  pc.ok = true;
  for (size_t i = 0; i < pc.pages; ++i) pc.present += scratch[i] & 1;
  return pc;
}

}  // namespace resid
