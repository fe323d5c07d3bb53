// BlockUring against a temporary file: each operation's result as the syscall would give it,
// completions signalled on the eventfd, and the lockdown the ring runs under (its only file is
// the disk, and io_uring_register is refused once it runs). Needs a kernel with io_uring; a
// build without liburing checks that create() says so.
#include "devices/host/block_uring.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/falloc.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#if MINIVMM_HAVE_LIBURING
#include <linux/io_uring.h>
#endif

namespace {

using minivmm::devices::BlockUring;

class TempFile {
 public:
  TempFile() {
    char tmpl[] = "/tmp/minivmm-uring-XXXXXX";
    fd_ = ::mkstemp(tmpl);
    path_ = tmpl;
    std::vector<char> data(64 * 1024, 'a');
    EXPECT_EQ(::write(fd_, data.data(), data.size()), static_cast<ssize_t>(data.size()));
  }
  ~TempFile() {
    ::close(fd_);
    ::unlink(path_.c_str());
  }
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
  std::string path_;
};

#if MINIVMM_HAVE_LIBURING

std::unique_ptr<BlockUring> make(const TempFile& f) {
  std::string why;
  auto ring = BlockUring::create(f.fd(), 8, why);
  EXPECT_TRUE(ring) << "io_uring: " << why;
  return ring;
}

TEST(BlockUringTest, WriteThenReadBackThroughTheRing) {
  TempFile f;
  auto ring = make(f);
  ASSERT_TRUE(ring);
  std::array<char, 512> out{}, in{};
  out.fill('z');
  iovec w{out.data(), out.size()};
  ASSERT_TRUE(ring->queue_writev(7, 4096, std::span(&w, 1)));
  ASSERT_EQ(ring->submit(), 1);
  BlockUring::Completion c;
  ASSERT_TRUE(ring->wait(c));
  EXPECT_EQ(c.tag, 7u);
  EXPECT_EQ(c.result, 512);
  // Two buffers in one readv: the scatter lands in order.
  iovec r[2] = {{in.data(), 256}, {in.data() + 256, 256}};
  ASSERT_TRUE(ring->queue_readv(8, 4096 - 256, std::span(r, 2)));
  ASSERT_TRUE(ring->wait(c));  // wait() submits what is queued
  EXPECT_EQ(c.tag, 8u);
  EXPECT_EQ(c.result, 512);
  EXPECT_EQ(in[0], 'a');
  EXPECT_EQ(in[255], 'a');
  EXPECT_EQ(in[256], 'z');
  EXPECT_EQ(in[511], 'z');
}

TEST(BlockUringTest, CompletionsSignalTheEventFdAndAreTakenWithoutAWait) {
  TempFile f;
  auto ring = make(f);
  ASSERT_TRUE(ring);
  ASSERT_TRUE(ring->queue_fdatasync(1));
  ASSERT_TRUE(ring->queue_punch_hole(2, 0, 4096));
  ASSERT_EQ(ring->submit(), 2);
  std::array<BlockUring::Completion, 4> got{};
  std::size_t n = 0;
  for (int i = 0; i < 100 && n < 2; ++i) {
    pollfd p{ring->event_fd(), POLLIN, 0};
    ASSERT_EQ(::poll(&p, 1, 1000), 1) << "no completion signalled";
    ring->drain_event_fd();
    n += ring->take(std::span(got).subspan(n));
  }
  ASSERT_EQ(n, 2u);
  for (std::size_t i = 0; i < n; ++i) {
    // tmpfs and ext4 punch holes; a file system that cannot says EOPNOTSUPP.
    EXPECT_TRUE(got[i].result == 0 || (got[i].tag == 2 && got[i].result == -EOPNOTSUPP))
        << "tag " << got[i].tag << " result " << got[i].result;
  }
  // io_uring publishes a completion before it signals the eventfd (and may defer the signal
  // past an RCU grace period), so the second completion's signal can land after the loop above
  // took it: the eventfd may be readable again. What it can never do is bring a completion
  // that was not asked for. (VirtioBlk counts such wakeups: uring_empty_wakeups.)
  pollfd p{ring->event_fd(), POLLIN, 0};
  if (::poll(&p, 1, 50) == 1) ring->drain_event_fd();
  EXPECT_EQ(ring->take(got), 0u) << "a third completion of two requests";
}

TEST(BlockUringTest, ErrorsComeBackAsNegativeErrno) {
  TempFile f;
  auto ring = make(f);
  ASSERT_TRUE(ring);
  std::array<char, 512> buf{};
  iovec v{buf.data(), buf.size()};
  // Past the end of a 64 KiB file: a read of nothing, as pread would say.
  ASSERT_TRUE(ring->queue_readv(3, 1 << 20, std::span(&v, 1)));
  BlockUring::Completion c;
  ASSERT_TRUE(ring->wait(c));
  EXPECT_EQ(c.result, 0);
  // A buffer the kernel cannot write to.
  iovec bad{reinterpret_cast<void*>(8), 512};
  ASSERT_TRUE(ring->queue_readv(4, 0, std::span(&bad, 1)));
  ASSERT_TRUE(ring->wait(c));
  EXPECT_EQ(c.result, -EFAULT);
}

// The lockdown: once running, the ring refuses every io_uring_register (no new files, no new
// eventfd, no lifting of its restrictions).
TEST(BlockUringTest, TheRunningRingRefusesRegistration) {
  TempFile f;
  auto ring = make(f);
  ASSERT_TRUE(ring);
  int other = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(other, 0);
  errno = 0;
  EXPECT_EQ(::syscall(SYS_io_uring_register, ring->ring_fd(), IORING_REGISTER_FILES, &other, 1),
            -1);
  EXPECT_EQ(errno, EACCES);
  errno = 0;
  EXPECT_EQ(::syscall(SYS_io_uring_register, ring->ring_fd(), IORING_REGISTER_EVENTFD, &other, 1),
            -1);
  EXPECT_EQ(errno, EACCES);
  ::close(other);
}

TEST(BlockUringTest, ASubmissionQueueThatIsFullRefusesMore) {
  TempFile f;
  auto ring = make(f);
  ASSERT_TRUE(ring);
  int queued = 0;
  while (queued < 64 && ring->queue_fdatasync(static_cast<std::uint64_t>(queued))) ++queued;
  EXPECT_EQ(queued, 8);  // the entries asked for
  ASSERT_EQ(ring->submit(), 8);
  BlockUring::Completion c;
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(ring->wait(c));
}

#else

TEST(BlockUringTest, WithoutLiburingCreateSaysSo) {
  TempFile f;
  std::string why;
  EXPECT_EQ(BlockUring::create(f.fd(), 8, why), nullptr);
  EXPECT_NE(why.find("liburing"), std::string::npos) << why;
}

#endif

}  // namespace
