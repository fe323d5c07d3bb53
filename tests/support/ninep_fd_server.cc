// Serves a folder with minivmm's 9p server (devices/virtio/9p/p9_server.h) to Linux's own 9p
// client over a socket pair: the test of the server against a real v9fs, where the kernel has
// 9p (the nested guest of scripts/nested_kvm.sh; this project's hosts may have none).
//
//   ninep_fd_server mount DIR MOUNTPOINT [ro] [MSIZE]
//
// Makes a socket pair, forks a server on one end and mounts the other as
//   mount -t 9p -o trans=fd,rfdno=N,wfdno=N,version=9p2000.L,msize=MSIZE none MOUNTPOINT
// then returns (0: mounted). The server runs until the client hangs up (umount), then writes
// its counters to DIR/../ninep_fd_server.<pid>.stats and exits. Needs root (mount).
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "devices/virtio/9p/p9_server.h"

namespace {

using minivmm::devices::p9::P9Server;

bool read_full(int fd, std::byte* p, std::size_t n) {
  while (n > 0) {
    const ssize_t r = ::read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}

bool write_full(int fd, const std::byte* p, std::size_t n) {
  while (n > 0) {
    const ssize_t r = ::write(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}

// One request at a time: size[4], the rest, the answer.
void serve(P9Server& server, int fd) {
  std::vector<std::byte> req(P9Server::kMaxMsize), rep(P9Server::kMaxMsize);
  for (;;) {
    if (!read_full(fd, req.data(), 4)) return;
    std::uint32_t size = 0;
    std::memcpy(&size, req.data(), 4);
    if (size < 7 || size > req.size()) {
      std::fprintf(stderr, "ninep_fd_server: message of %u bytes: hanging up\n", size);
      return;
    }
    if (!read_full(fd, req.data() + 4, size - 4)) return;
    const std::size_t n = server.handle(std::span(req).first(size), rep);
    if (n == 0 || !write_full(fd, rep.data(), n)) return;
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4 || std::string(argv[1]) != "mount") {
    std::fprintf(stderr, "usage: ninep_fd_server mount DIR MOUNTPOINT [ro] [MSIZE]\n");
    return 2;
  }
  const std::string dir = argv[2], mnt = argv[3];
  bool ro = false;
  std::string msize = "262144";
  for (int i = 4; i < argc; ++i) {
    if (std::string(argv[i]) == "ro") {
      ro = true;
    } else {
      msize = argv[i];
    }
  }
  // Each fid the guest keeps is a descriptor here: as many as the hard limit allows.
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0) {
    rl.rlim_cur = rl.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &rl);
  }
  std::string why;
  auto server = P9Server::open(dir, ro, why);
  if (!server) {
    std::fprintf(stderr, "ninep_fd_server: %s\n", why.c_str());
    return 1;
  }
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    std::perror("socketpair");
    return 1;
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    std::perror("fork");
    return 1;
  }
  if (pid == 0) {
    ::close(sv[1]);
    ::setsid();
    serve(*server, sv[0]);
    const auto s = server->stats();
    const std::string path = dir + "/../ninep_fd_server." + std::to_string(::getpid()) + ".stats";
    if (FILE* f = std::fopen(path.c_str(), "w")) {
      for (std::size_t i = 0; i < s.requests.size(); ++i) {
        std::fprintf(f, "%s %llu\n",
                     std::string(minivmm::devices::p9::op_name(
                                     static_cast<minivmm::devices::p9::Op>(i)))
                         .c_str(),
                     static_cast<unsigned long long>(s.requests[i]));
      }
      std::fprintf(f, "errors %llu\nescapes_refused %llu\nread_only_refused %llu\n"
                      "bytes_read %llu\nbytes_written %llu\n",
                   static_cast<unsigned long long>(s.errors),
                   static_cast<unsigned long long>(s.escapes_refused),
                   static_cast<unsigned long long>(s.read_only_refused),
                   static_cast<unsigned long long>(s.bytes_read),
                   static_cast<unsigned long long>(s.bytes_written));
      std::fclose(f);
    }
    _exit(0);
  }
  ::close(sv[0]);
  server.reset();
  const std::string opts = "trans=fd,rfdno=" + std::to_string(sv[1]) +
                           ",wfdno=" + std::to_string(sv[1]) +
                           ",version=9p2000.L,msize=" + msize;
  // The kernel takes its own references to the descriptors: ours can go after the mount.
  // A read-only share is mounted read-write: the server's own refusal is what is tested.
  if (::mount("ninep", mnt.c_str(), "9p", 0, opts.c_str()) != 0) {
    std::fprintf(stderr, "ninep_fd_server: mount -t 9p -o %s %s: %s\n", opts.c_str(),
                 mnt.c_str(), std::strerror(errno));
    ::kill(pid, SIGTERM);
    ::waitpid(pid, nullptr, 0);
    return 1;
  }
  ::close(sv[1]);
  std::printf("%d\n", pid);
  return 0;
}
