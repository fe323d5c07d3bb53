#include "vmm/host/mapped_file.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <utility>

#include "vmm/kvm/unique_fd.h"
#include "vmm/vmm_error.h"

namespace minivmm::vmm {
namespace {

// The guarded mappings, for the SIGBUS handler (which may look at nothing but these).
struct Region {
  const MappedFile* file = nullptr;
  std::uintptr_t start = 0;
  std::uintptr_t end = 0;
  volatile sig_atomic_t gone = 0;
};
std::array<Region, TruncationGuard::kMaxFiles> g_regions{};
struct sigaction g_previous_bus {};

void on_bus(int sig, siginfo_t* info, void* context) {
  const auto addr = reinterpret_cast<std::uintptr_t>(info != nullptr ? info->si_addr : nullptr);
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  for (Region& r : g_regions) {
    if (r.file == nullptr || addr < r.start || addr >= r.end) continue;
    // Zeros over the vanished page (mmap is a plain syscall, safe here); returning re-runs
    // the read, which now succeeds. The loader finishes, and the caller refuses the file.
    void* at = reinterpret_cast<void*>(addr & ~(page - 1));
    if (::mmap(at, page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != MAP_FAILED) {
      r.gone = 1;
      return;
    }
    break;
  }
  // Not ours (or the zero page could not be mapped): what would have happened without us.
  if (g_previous_bus.sa_flags & SA_SIGINFO) {
    if (g_previous_bus.sa_sigaction != nullptr) g_previous_bus.sa_sigaction(sig, info, context);
    return;
  }
  if (g_previous_bus.sa_handler == SIG_IGN) return;
  if (g_previous_bus.sa_handler == SIG_DFL || g_previous_bus.sa_handler == nullptr) {
    ::signal(SIGBUS, SIG_DFL);  // the fault repeats on return and ends the process
    return;
  }
  g_previous_bus.sa_handler(sig);
}

}  // namespace

MappedFile::~MappedFile() {
  if (addr_ != nullptr) ::munmap(addr_, size_);
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : addr_(std::exchange(other.addr_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      path_(std::move(other.path_)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    if (addr_ != nullptr) ::munmap(addr_, size_);
    addr_ = std::exchange(other.addr_, nullptr);
    size_ = std::exchange(other.size_, 0);
    path_ = std::move(other.path_);
  }
  return *this;
}

MappedFile MappedFile::open(const std::string& option, const std::string& path, ExitCode code,
                            const FileSizeLimit& limit) {
  const auto fail = [&](const std::string& why) {
    return VmmError(code, option + ": '" + path + "' " + why);
  };
  // O_NONBLOCK: opening a FIFO nobody writes to must not hang; fstat on the open fd (not stat
  // on the path) so that what is checked is what is mapped.
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
  if (!fd.valid()) {
    const int err = errno;
    // A socket says ENXIO, which names nothing: say what it is not.
    struct stat what {};
    if (::stat(path.c_str(), &what) == 0 && !S_ISREG(what.st_mode)) throw fail("is not a regular file");
    throw fail(std::string("cannot be opened: ") + std::strerror(err));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) throw fail(std::string("cannot be read: ") + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) throw fail("is not a regular file");
  const auto size = static_cast<std::uint64_t>(st.st_size);
  if (size > limit.max_bytes) {
    throw VmmError(limit.code, option + ": '" + path + "' is " + std::to_string(size) +
                                   " bytes, more than " + limit.bound + " holds (" +
                                   std::to_string(limit.max_bytes) + " bytes)");
  }
  MappedFile m;
  m.path_ = path;
  if (size == 0) return m;
  void* p = ::mmap(nullptr, static_cast<std::size_t>(size), PROT_READ, MAP_PRIVATE, fd.get(), 0);
  if (p == MAP_FAILED) throw fail(std::string("cannot be mapped: ") + std::strerror(errno));
  m.addr_ = p;
  m.size_ = static_cast<std::size_t>(size);
  // Read front to back, once: the kernel may read ahead.
  ::madvise(p, m.size_, MADV_SEQUENTIAL);
  return m;
}

TruncationGuard::TruncationGuard(std::initializer_list<const MappedFile*> files) {
  std::size_t i = 0;
  for (const MappedFile* f : files) {
    if (f == nullptr || f->addr_ == nullptr || i == g_regions.size()) continue;
    Region& r = g_regions[i++];
    r.file = f;
    r.start = reinterpret_cast<std::uintptr_t>(f->addr_);
    r.end = r.start + f->size_;
    r.gone = 0;
  }
  struct sigaction sa {};
  sa.sa_sigaction = on_bus;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGBUS, &sa, &g_previous_bus);
}

TruncationGuard::~TruncationGuard() {
  ::sigaction(SIGBUS, &g_previous_bus, nullptr);
  for (Region& r : g_regions) r = Region{};
}

const MappedFile* TruncationGuard::truncated() const noexcept {
  for (const Region& r : g_regions) {
    if (r.file != nullptr && r.gone) return r.file;
  }
  return nullptr;
}

}  // namespace minivmm::vmm
