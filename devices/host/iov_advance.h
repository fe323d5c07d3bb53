// Where a scatter list stands after a short transfer. preadv/pwritev and io_uring's READV/WRITEV
// may move fewer bytes than asked (a signal, a page cache under pressure); the rest is sent
// again from where it stopped. BlockFile (inline and worker engines) and VirtioBlk's io_uring
// engine both continue that way, so they share this step.
#pragma once

#include <sys/uio.h>

#include <algorithm>
#include <cstddef>
#include <span>

namespace minivmm::devices {

// Moves `done` bytes into `iov` from entry `first`: entries it used up and empty ones are passed,
// a partly moved one is trimmed in place. Returns the first entry with bytes left, iov.size()
// when none is. `done` beyond what is left is ignored. advance_iov(iov, first, 0) skips empties.
inline std::size_t advance_iov(std::span<iovec> iov, std::size_t first, std::size_t done) noexcept {
  while (first < iov.size()) {
    iovec& v = iov[first];
    const std::size_t take = std::min(done, v.iov_len);
    v.iov_base = static_cast<char*>(v.iov_base) + take;
    v.iov_len -= take;
    done -= take;
    if (v.iov_len != 0) break;
    ++first;
  }
  return first;
}

}  // namespace minivmm::devices
