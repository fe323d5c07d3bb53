#include "vmm/gdb/gdb_stub.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>

#include "vmm/exit_code.h"
#include "devices/log/log.h"
#include "vmm/vmm_error.h"

namespace minivmm::vmm::gdb {
namespace {

constexpr std::size_t kMaxOutput = 1 << 20;  // a client that reads nothing is dropped past this
constexpr int kSigTrap = 5, kSigSegv = 11;

[[noreturn]] void fail(const std::string& what) {
  throw VmmError(ExitCode::kUsage, "--gdb: " + what + ": " + std::strerror(errno));
}

}  // namespace

std::optional<GdbAddress> parse_gdb_address(const std::string& s) {
  GdbAddress a;
  if (s.rfind("unix:", 0) == 0) {
    a.unix_socket = true;
    a.path = s.substr(5);
    if (a.path.empty() || a.path.size() >= sizeof(sockaddr_un{}.sun_path)) return std::nullopt;
    return a;
  }
  if (s.rfind("tcp:", 0) != 0) return std::nullopt;
  const std::string rest = s.substr(4);
  const auto colon = rest.rfind(':');
  if (colon == std::string::npos) return std::nullopt;
  std::string host = rest.substr(0, colon);
  const std::string port = rest.substr(colon + 1);
  if (host.empty() || host == "localhost") host = "127.0.0.1";
  in_addr ia{};
  if (::inet_pton(AF_INET, host.c_str(), &ia) != 1) return std::nullopt;
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos) {
    return std::nullopt;
  }
  const unsigned long p = std::stoul(port);
  if (p > 65535) return std::nullopt;
  a.host = host;
  a.port = static_cast<std::uint16_t>(p);
  return a;
}

GdbStub::GdbStub(GdbOptions opts, loop::EventLoop& loop, std::vector<int> vcpu_fds,
                 devices::GuestMemory memory, bool block_irq_on_step, KvmGdbHooks hooks)
    : opts_(std::move(opts)), loop_(loop), machine_(std::move(hooks)) {
  const GdbAddress& a = opts_.address;
  if (a.unix_socket) {
    listen_fd_.reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!listen_fd_.valid()) fail("socket");
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    std::memcpy(sa.sun_path, a.path.c_str(), a.path.size());
    // A stale socket file (a VMM that died) is replaced; anything else is the user's.
    struct stat st {};
    if (::lstat(a.path.c_str(), &st) == 0) {
      if (!S_ISSOCK(st.st_mode)) {
        errno = EEXIST;
        fail(a.path);
      }
      ::unlink(a.path.c_str());
    }
    // Born 0600, as the control socket: the umask is process-wide, and no other thread runs yet.
    const mode_t old = ::umask(0177);
    const int rc = ::bind(listen_fd_.get(), reinterpret_cast<const sockaddr*>(&sa), sizeof sa);
    ::umask(old);
    if (rc != 0) fail("bind " + a.path);
    if (::chmod(a.path.c_str(), 0600) != 0) fail("chmod " + a.path);
    where_ = a.path;
  } else {
    listen_fd_.reset(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!listen_fd_.valid()) fail("socket");
    const int one = 1;
    ::setsockopt(listen_fd_.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(a.port);
    ::inet_pton(AF_INET, a.host.c_str(), &sa.sin_addr);
    if (::bind(listen_fd_.get(), reinterpret_cast<const sockaddr*>(&sa), sizeof sa) != 0) {
      fail("bind " + a.host + ":" + std::to_string(a.port));
    }
    socklen_t len = sizeof sa;
    ::getsockname(listen_fd_.get(), reinterpret_cast<sockaddr*>(&sa), &len);
    where_ = a.host + ":" + std::to_string(ntohs(sa.sin_port));
  }
  if (::listen(listen_fd_.get(), 1) != 0) fail("listen");

  KvmGdbHooks h;
  h.pause = [this] { stop_for_gdb(); };
  h.resume = [this] {
    stopped_for_gdb_ = false;
    machine_.resume();
  };
  h.end_run = machine_.end_run;
  h.stopped = [this](const StopEvent& ev) {
    ++stats_.stops;
    if (session_) session_->stopped(ev);
  };
  target_ = std::make_unique<KvmGdbTarget>(std::move(vcpu_fds), memory, block_irq_on_step,
                                           std::move(h));
  loop_.watch(listen_fd_.get(), loop::kReadable, {[this] { on_accept(); }, nullptr, nullptr});
  log::info("gdb: listening on {}{}", where_, opts_.wait ? " (the guest waits for it)" : "");
}

GdbStub::~GdbStub() {
  if (client_fd_.valid()) loop_.unwatch(client_fd_.get());
  if (listen_fd_.valid()) loop_.unwatch(listen_fd_.get());
  if (opts_.address.unix_socket) ::unlink(opts_.address.path.c_str());
}

void GdbStub::stop_for_gdb() {
  if (!stopped_for_gdb_) {
    machine_.pause();
    stopped_for_gdb_ = true;
  }
  target_->note_stopped();
}

void GdbStub::note_initial_stop() {
  stopped_for_gdb_ = true;
  held_stop_ = {0, kSigTrap, StopKind::kSignal, 0};
}

bool GdbStub::debug_exit(int cpu, int vcpu_fd, const kvm_debug_exit_arch& arch) {
  if (!target_->debug_exit(cpu, vcpu_fd, arch)) return false;
  loop_.schedule([this] { deliver_debug_stop(); });
  return true;
}

void GdbStub::deliver_debug_stop() {
  const auto ev = target_->take_stop();
  if (!ev) return;
  if (session_ && session_->running()) {
    stop_for_gdb();
    ++stats_.stops;
    session_->stopped(*ev);
    return;
  }
  // Nobody is waiting for this stop: gdb has the guest stopped already (two vCPUs hit at once:
  // the other one parked with the pause), or it left. A vCPU that stopped for it waits for a
  // pause; when gdb is not holding the guest, a pause and resume lets it go on.
  ++stats_.stale_stops;
  if (!stopped_for_gdb_) {
    machine_.pause();
    machine_.resume();
  }
}

bool GdbStub::hold_fault(int status, const std::string& why) {
  if (!opts_.on_fault || releasing_.load()) return false;
  const bool fault =
      status == to_int(ExitCode::kTripleFault) || status == to_int(ExitCode::kGuestPanicked);
  if (fault_held_.load()) {
    // Held: the guest's own later ends (the vCPU that wrote pvpanic runs a few instructions
    // more before the loop stops it, and may reach its debug exit) wait with it; a signal or a
    // host failure does not.
    const bool host = status == to_int(ExitCode::kSigint) || status == to_int(ExitCode::kSigterm) ||
                      status == to_int(ExitCode::kSighup) ||
                      status == to_int(ExitCode::kHostFailure) ||
                      status == to_int(ExitCode::kSeccompViolation);
    return !host;
  }
  if (!fault || fault_held_.exchange(true)) return false;
  fault_status_ = status;
  fault_why_ = why;
  loop_.schedule([this] {
    ++stats_.faults_held;
    stop_for_gdb();
    held_stop_ = {0, kSigSegv, StopKind::kSignal, 0};
    // Said on stderr whatever the log level: a CI job's log is where a person finds it.
    std::fprintf(stderr, "minivmm: %s: held for the debugger (--gdb-on-fault): gdb -ex 'target remote %s'\n",
                 fault_why_.c_str(), where_.c_str());
    std::fflush(stderr);
    if (session_ && session_->running()) {
      ++stats_.stops;
      session_->stopped(held_stop_);
    }
  });
  return true;
}

void GdbStub::add_session_stats() {
  if (!session_) return;
  const SessionStats& s = session_->stats();
  past_sessions_.packets += s.packets;
  past_sessions_.unsupported += s.unsupported;
  past_sessions_.errors += s.errors;
  past_sessions_.resumes += s.resumes;
  past_sessions_.steps += s.steps;
  past_sessions_.stops += s.stops;
  past_sessions_.interrupts += s.interrupts;
  const FramingStats& f = session_->framing();
  past_framing_.bad_checksums += f.bad_checksums;
  past_framing_.oversized += f.oversized;
  past_framing_.junk_bytes += f.junk_bytes;
  past_framing_.nacks += f.nacks;
}

nlohmann::json GdbStub::stats_json() const {
  SessionStats s = past_sessions_;
  FramingStats f = past_framing_;
  if (session_) {
    const SessionStats& c = session_->stats();
    s.packets += c.packets;
    s.unsupported += c.unsupported;
    s.errors += c.errors;
    s.resumes += c.resumes;
    s.steps += c.steps;
    s.stops += c.stops;
    s.interrupts += c.interrupts;
    f.bad_checksums += session_->framing().bad_checksums;
    f.oversized += session_->framing().oversized;
    f.junk_bytes += session_->framing().junk_bytes;
    f.nacks += session_->framing().nacks;
  }
  const KvmGdbStats t = target_->stats();
  return {{"where", where_},
          {"connections", stats_.connections},
          {"refused", stats_.refused},
          {"stops", stats_.stops},
          {"stale_stops", stats_.stale_stops},
          {"faults_held", stats_.faults_held},
          {"packets", s.packets},
          {"unsupported_packets", s.unsupported},
          {"error_replies", s.errors},
          {"resumes", s.resumes},
          {"steps", s.steps},
          {"interrupts", s.interrupts},
          {"bad_checksums", f.bad_checksums},
          {"oversized_packets", f.oversized},
          {"junk_bytes", f.junk_bytes},
          {"nacks", f.nacks},
          {"debug_exits", t.debug_exits},
          {"guest_int3_reinjected", t.guest_int3_reinjected},
          {"kvmclock_ctrl", t.kvmclock_ctrl},
          {"translate_failures", t.translate_failures}};
}

void GdbStub::run_ended(int status) {
  if (!session_) return;
  session_->exited(status);
  if (!out_.empty()) {
    ::send(client_fd_.get(), out_.data(), out_.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    out_.clear();
  }
}

void GdbStub::on_accept() {
  const int fd = ::accept4(listen_fd_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd < 0) return;
  if (client_fd_.valid()) {
    ++stats_.refused;
    log::warn("gdb: a second client refused (one at a time)");
    ::close(fd);
    return;
  }
  ++stats_.connections;
  client_fd_.reset(fd);
  if (!opts_.address.unix_socket) {
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  if (!stopped_for_gdb_) held_stop_ = {0, kSigTrap, StopKind::kSignal, 0};
  stop_for_gdb();
  session_ = std::make_unique<Session>(*target_, [this](std::string_view b) { send(b); },
                                       held_stop_);
  loop_.watch(fd, loop::kReadable,
              {[this] { on_readable(); }, [this] { on_writable(); },
               [this] { close_client(true); }});
  log::info("gdb: client connected; the guest is stopped");
}

void GdbStub::on_readable() {
  std::uint8_t buf[4096];
  const ssize_t n = ::recv(client_fd_.get(), buf, sizeof buf, 0);
  if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
    close_client(true);
    return;
  }
  if (n < 0) return;
  session_->feed(std::span<const std::uint8_t>(buf, static_cast<std::size_t>(n)));
  if (session_ && session_->finished()) close_client(false);
}

void GdbStub::send(std::string_view bytes) {
  if (!client_fd_.valid()) return;
  if (out_.empty()) {
    const ssize_t n = ::send(client_fd_.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n == static_cast<ssize_t>(bytes.size())) return;
    if (n < 0 && errno != EAGAIN) return;  // the read side sees the end
    bytes.remove_prefix(n > 0 ? static_cast<std::size_t>(n) : 0);
  }
  if (out_.size() + bytes.size() > kMaxOutput) {
    log::warn("gdb: the client reads nothing; dropped");
    loop_.schedule([this] { close_client(true); });
    return;
  }
  out_.append(bytes);
  loop_.set_interest(client_fd_.get(), loop::kReadable | loop::kWritable);
}

void GdbStub::on_writable() {
  if (!client_fd_.valid() || out_.empty()) return;
  const ssize_t n = ::send(client_fd_.get(), out_.data(), out_.size(), MSG_NOSIGNAL);
  if (n > 0) out_.erase(0, static_cast<std::size_t>(n));
  if (out_.empty()) loop_.set_interest(client_fd_.get(), loop::kReadable);
}

void GdbStub::close_client(bool detach) {
  if (!client_fd_.valid()) return;
  // What is still queued goes out if it can (D's OK).
  if (!out_.empty()) ::send(client_fd_.get(), out_.data(), out_.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  out_.clear();
  loop_.unwatch(client_fd_.get());
  client_fd_.reset();
  add_session_stats();
  session_.reset();
  log::info("gdb: client gone");
  if (detach) {
    // Gone without `D`: as a detach.
    target_->clear_all();
    if (stopped_for_gdb_ && !fault_held_.load()) {
      stopped_for_gdb_ = false;
      machine_.resume();
    }
  }
  // A held fault ends the run as it would have once gdb is done with it.
  if (fault_held_.load()) {
    releasing_ = true;
    machine_.end_run(fault_status_, fault_why_);
  }
}

}  // namespace minivmm::vmm::gdb
