#include "vmm/machine/machine.h"
#include "vmm/report/process_memory.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/core.h>

#include "devices/log/log.h"
#include "loop/auto_poller.h"
#include "timers/clock_read_counter.h"
#include "timers/syscall_counters.h"
#include "vmm/boot/kernel_loader.h"
#include "vmm/host/mapped_file.h"
#include "vmm/vmm_error.h"

namespace minivmm::vmm {
namespace {

constexpr std::uint32_t kIrqPit = 0;
constexpr std::uint32_t kIrqKeyboard = 1;
constexpr std::uint32_t kIrqCom1 = 4;
constexpr std::uint32_t kIrqRtc = 8;
constexpr std::uint32_t kIrqMouse = 12;
constexpr std::uint64_t kTestdevPageBytes = 4096;

double seconds(timers::Nanos n) { return static_cast<double>(n.count()) / 1e9; }

double seconds(const timeval& tv) {
  return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) / 1e6;
}

std::unique_ptr<timers::AlarmTimer> make_alarm(const Config& c) {
  if (c.periodic_alarm_hz <= 0 || c.periodic_alarm_hz > 100'000) {
    throw VmmError(ExitCode::kUsage, "--periodic-hz must be between 1 and 100000");
  }
  timers::AlarmOptions opts;
  opts.periodic_interval = timers::Nanos{1'000'000'000 / c.periodic_alarm_hz};
  try {
    return timers::make_alarm_timer(c.alarm, opts);
  } catch (const std::system_error& e) {
    throw VmmError(ExitCode::kHostFailure, std::string("host alarm: ") + e.what());
  }
}

std::unique_ptr<loop::Poller> make_loop_poller(const Config& c) {
  try {
    return loop::make_poller(c.poller);
  } catch (const std::system_error& e) {
    throw VmmError(ExitCode::kHostFailure, std::string("poller: ") + e.what());
  }
}

// The guest's command line: the user's, then the virtio-mmio devices, which Linux finds only
// there on x86 (no discovery). Their layout depends only on how many there are, so it is known
// before the kernel is loaded, which happens before KVM exists.
std::string boot_cmdline(const Config& c) {
  const std::string devices =
      VirtioMmioDevices::cmdline_for(c.drives.size() + (c.virtio_console ? 1 : 0));
  if (devices.empty()) return c.cmdline;
  return c.cmdline.empty() ? devices : c.cmdline + " " + devices;
}

std::vector<devices::BlockFile> open_drives(const Config& c) {
  std::vector<devices::BlockFile> files;
  for (const DriveSpec& d : c.drives) {
    try {
      files.push_back(devices::BlockFile::open(d.path, d.read_only));
    } catch (const devices::BlockFileError& e) {
      throw VmmError(ExitCode::kBadKernel, e.what());
    }
  }
  return files;
}

SeccompSandbox make_sandbox(const Config& c) {
  try {
    return SeccompSandbox(c.seccomp, c.seccomp_selftest);
  } catch (const std::system_error& e) {
    throw VmmError(ExitCode::kHostFailure, std::string("seccomp: ") + e.what());
  }
}

}  // namespace

Machine::Machine(Config config, std::function<void()> open_outputs)
    : config_(std::move(config)),
      ram_(config_.memory_bytes),
      kernel_(load_guest_kernel()),
      alarm_(make_alarm(config_)),
      dynticks_(std::make_unique<timers::Dynticks>(
          *alarm_, mono_, std::vector<timers::TimerList*>{&vm_timers_, &rt_timers_},
          timers::DynticksOptions{timers::Nanos{config_.min_delta_ns}})),
      loop_(std::make_unique<loop::EventLoop>(make_loop_poller(config_), *dynticks_)),
      control_(make_control_socket()),
      drive_files_(open_drives(config_)),
      outputs_open_((open_outputs ? open_outputs() : void(), true)),
      kvm_(),
      vm_(kvm_, ram_.memory()),
      sandbox_(make_sandbox(config_)),
      seccomp_facts_(seccomp_facts()),
      irq0_(vm_, kIrqPit,
            config_.irq_inject_ioctl.value_or(config_.pit_tick == PitTick::kVcpu)
                ? IrqInject::kIoctl
                : IrqInject::kIrqfd,
            // minivmm's PIT counts the guest's acknowledgements to find ticks that merged
            // while a busy host kept the vCPU from running (devices/pc/i8254/i8254_pit.h).
            config_.pit == PitMode::kUser),
      irq1_(vm_, kIrqKeyboard),
      irq4_(vm_, kIrqCom1),
      irq8_(vm_, kIrqRtc),
      irq12_(vm_, kIrqMouse),
      uart_(irq4_, console_sink_, &rt_timers_, &vm_timers_),
      debug_exit_([this](int status) { request_stop_status(status, "guest debug-exit"); }),
      i8042_([this] { request_stop(ExitCode::kOk, "guest reset through the i8042"); }, &irq1_,
             &irq12_),
      rtc_(vm_timers_, wall_clock_, irq8_, config_.memory_bytes),
      fw_cfg_(devices::FwCfgConfig{config_.memory_bytes, static_cast<std::uint16_t>(config_.cpus),
                                   static_cast<std::uint16_t>(config_.cpus)}),
      testdev_flush_([this](std::uint64_t page) { flush_guest_page(page); }),
      duration_timer_(rt_timers_, "duration",
                      [this](const timers::Timer::Expiry&) {
                        request_stop(ExitCode::kOk, "--duration expired");
                      }) {
  // SIGINT/SIGTERM/SIGHUP (and SIGTSTP/SIGCONT) wait, pending, for the signal thread started at
  // the end: a Ctrl-C during set-up (after ConsoleInput made the terminal raw) must not kill the
  // process the default way.
  try {
    StopSignals::block();
  } catch (const std::system_error& e) {
    throw VmmError(ExitCode::kHostFailure, std::string("signals: ") + e.what());
  }

  // Port map of a PC (the addresses every OS probes).
  bus_.attach(0x3f8, 8, uart_);
  bus_.attach(0xf4, 4, debug_exit_);
  bus_.attach(0x80, 1, post_port_);
  bus_.attach(0x60, 1, i8042_.data_port());
  bus_.attach(0x64, 1, i8042_.command_port());
  bus_.attach(0x70, 2, rtc_);
  vm_.set_pics_as_bios_leaves_them(kernel_.bios_timer && config_.pit == PitMode::kUser);
  // kvm-unit-tests' devices only when asked for (--testdev): without them a guest has no way
  // to drive arbitrary GSIs, and their ports read as an empty ISA bus does.
  if (config_.testdev) {
    bus_.attach(devices::FwCfg::kPort, devices::FwCfg::kPortCount, fw_cfg_);
    bus_.attach(devices::PcTestdevPort::kPort, devices::PcTestdevPort::kPortCount,
                testdev_port_);
    bus_.attach(devices::PcTestdevPort::kBytePort, devices::PcTestdevPort::kPortCount,
                testdev_port_);
    bus_.attach(devices::PcTestdevFlushPage::kPort, devices::PcTestdevFlushPage::kPortCount,
                testdev_flush_);
    {
      // Level changes through KVM_IRQ_LINE: GSIs 0-15 reach both the PIC and the IOAPIC, 16-23
      // the IOAPIC only (KVM's default routing, as QEMU's ISA bus wires pc-testdev).
      std::array<devices::IrqLine*, devices::PcTestdevIrq::kLines> wires{};
      for (std::size_t gsi = 0; gsi < wires.size(); ++gsi) {
        testdev_lines_[gsi] = std::make_unique<KvmIrqLine>(vm_, static_cast<std::uint32_t>(gsi),
                                                           IrqInject::kIoctl);
        wires[gsi] = testdev_lines_[gsi].get();
      }
      testdev_irq_ = std::make_unique<devices::PcTestdevIrq>(wires);
      // Above the largest guest's RAM (3 GiB), so its accesses always exit to the MMIO bus.
      mmio_bus_.attach(devices::PcTestdevIomem::kBase, devices::PcTestdevIomem::kSize,
                       testdev_iomem_);
      bus_.attach(devices::PcTestdevIrq::kPort, devices::PcTestdevIrq::kPortCount,
                  *testdev_irq_);
    }
  }
  if (config_.pit == PitMode::kKvm) {
    vm_.create_kernel_pit();
  } else {
    timers::TimerList* pit_timers = &vm_timers_;
    if (config_.pit_tick == PitTick::kVcpu) {
      vcpu_timers_ = std::make_unique<timers::ThreadTimers>(
          mono_, std::vector<timers::TimerList*>{&vcpu_vm_timers_},
          timers::DynticksOptions{timers::Nanos{config_.min_delta_ns}});
      pit_timers = &vcpu_vm_timers_;
    }
    if (config_.pit_tick == PitTick::kKernel) {
      KernelPulseTrain::Binding binding;
      binding.attach = [this](int fd) { vm_.add_irqfd(fd, kIrqPit); };
      binding.detach = [this](int fd) { vm_.remove_irqfd(fd, kIrqPit); };
      binding.failed = [this](const std::string& why) {
        log::error("{}", why);
        request_stop(ExitCode::kHostFailure, why);
      };
      pit_train_ = std::make_unique<KernelPulseTrain>(vm_timers_, std::move(binding));
    }
    pit_ = std::make_unique<devices::I8254Pit>(*pit_timers, irq0_, config_.lost_ticks,
                                               pit_train_.get());
    speaker_ = std::make_unique<devices::I8254SpeakerPort>(*pit_);
    bus_.attach(0x40, 4, *pit_);
    bus_.attach(0x61, 1, *speaker_);
    if (kernel_.bios_timer) {
      // What a PC BIOS leaves running (SeaBIOS pit_setup): counter 0 in mode 3 with count 0,
      // i.e. 65536, an 18.2 Hz square wave on IRQ0, whose INT 08h handler is in the IVT.
      const std::uint8_t program[] = {0x36, 0x00, 0x00};
      pit_->write(3, std::span<const std::uint8_t>(program, 1));
      pit_->write(0, std::span<const std::uint8_t>(program + 1, 1));
      pit_->write(0, std::span<const std::uint8_t>(program + 2, 1));
    }
  }

  if (!drive_files_.empty() || config_.virtio_console) {
    virtio_ = std::make_unique<VirtioMmioDevices>(vm_, *loop_, mmio_bus_);
    if (config_.virtio_console) {
      auto console = std::make_unique<devices::VirtioConsole>(console_sink_);
      virtio_console_ = console.get();
      // A transmit turn that stopped at its cap continues from the loop, after whatever else
      // is ready there. The loop does not run once the devices are gone (virtio_ is destroyed
      // before loop_, after the last run_once()).
      console->set_on_tx_pending([this, c = console.get()] {
        loop_->schedule([c] { c->resume_transmit(); });
      });
      virtio_->add("console", std::move(console));
    }
    for (std::size_t i = 0; i < drive_files_.size(); ++i) {
      const DriveSpec& spec = config_.drives[i];
      const std::string id = "minivmm-blk" + std::to_string(i);
      std::unique_ptr<devices::VirtioBlk> blk;
      if (spec.aio != DriveAio::kThreads) {
        std::string why;
        auto ring = devices::BlockUring::create(drive_files_[i].fd(),
                                                devices::VirtioBlk::kQueueSize, why);
        if (ring) {
          blk = std::make_unique<devices::VirtioBlk>(std::move(drive_files_[i]), id,
                                                     std::move(ring));
          seccomp_facts_.blk_uring = true;
        } else if (spec.aio == DriveAio::kIoUring) {
          throw VmmError(ExitCode::kHostFailure,
                         "--drive " + spec.path + ",aio=io_uring: " + why);
        } else {
          log::info("drive {}: io_uring unavailable ({}); a worker thread serves it", spec.path,
                    why);
        }
      }
      if (!blk) {
        blk = std::make_unique<devices::VirtioBlk>(
            std::move(drive_files_[i]), id, true, [this] {
              return sandbox_.try_enter(ThreadKind::kBlkWorker,
                                        blk_worker_allow_list(seccomp_facts_));
            });
        ++blk_workers_;
      }
      virtio_blks_.push_back(blk.get());
      virtio_->add("blk" + std::to_string(i), std::move(blk));
    }
    drive_files_.clear();
    // The kernel was loaded (boot_cmdline) with these devices' fragment on its command line.
  }

  if (config_.console_input) {
    devices::ConsoleInputOptions opts;
    opts.interactive = config_.interactive;
    auto on_quit = [this] { request_stop(ExitCode::kOk, "quit from the console (Ctrl-A x)"); };
    if (virtio_console_ != nullptr) {
      console_input_ = std::make_unique<devices::ConsoleInput>(
          *loop_, static_cast<devices::ConsoleRxPort&>(*virtio_console_), on_quit, opts);
    } else {
      console_input_ = std::make_unique<devices::ConsoleInput>(*loop_, uart_, on_quit, opts);
    }
  }

  const LoadedKernel& k = kernel_;
  log::debug("kernel loaded at {:#x}-{:#x}, entry {:#x}, boot info {:#x}", k.load_addr,
             k.load_end, k.entry_addr, k.boot_info_addr);

  std::vector<kvm_cpuid_entry2> cpuid;
  try {
    cpuid = apply_cpuid_policy(kvm_.supported_cpuid(), config_.cpu, config_.cpuid_mask);
  } catch (const std::invalid_argument& e) {
    throw VmmError(ExitCode::kUsage, e.what());
  }
  {
    const int max_vcpus = std::max(kvm_.check_extension(KVM_CAP_MAX_VCPUS),
                                   kvm_.check_extension(KVM_CAP_NR_VCPUS));
    if (max_vcpus > 0 && config_.cpus > static_cast<std::uint32_t>(max_vcpus)) {
      throw VmmError(ExitCode::kUsage, "--cpus " + std::to_string(config_.cpus) +
                                           ": this host's KVM allows at most " +
                                           std::to_string(max_vcpus));
    }
  }
  for (std::uint32_t i = 0; i < config_.cpus; ++i) {
    auto vcpu = std::make_unique<Vcpu>(vm_, static_cast<int>(i), bus_,
                                       [this](ExitCode code, const std::string& why) {
                                         request_stop(code, why);
                                       });
    std::vector<kvm_cpuid_entry2> own;
    try {
      own = cpuid_for_vcpu(cpuid, i, config_.cpus);
    } catch (const std::invalid_argument& e) {
      throw VmmError(ExitCode::kUsage, e.what());
    }
    if (i == 0) {
      vcpu->configure(k.boot_state, own);
    } else {
      vcpu->configure_ap(own);
    }
    vcpu->cpu_affinity(config_.cpu_affinity.vcpu);
    vcpu->mmio_bus(&mmio_bus_);
    vcpu->on_steady_state([this, fd = vcpu->fd()] {
      return sandbox_.try_enter(ThreadKind::kVcpu, vcpu_allow_list(seccomp_facts_, fd));
    });
    vcpus_.push_back(std::move(vcpu));
  }
  if (vcpu_timers_) {
    // The PIT's hosted timers live on the boot CPU, the one that takes the 8259's interrupts.
    vcpu_timers_->set_wake([this] { vcpus_[0]->interrupt(); });
    vcpus_[0]->host_timers(vcpu_timers_.get());
  }

  // Before run() starts the vCPU thread, so that it and every later thread inherit the mask.
  try {
    stop_signals_ = std::make_unique<StopSignals>(
        [this](int signo) { on_signal(signo); },
        [this] {
          return sandbox_.try_enter(ThreadKind::kSignals, signals_allow_list(seccomp_facts_));
        });
  } catch (const std::system_error& e) {
    throw VmmError(ExitCode::kHostFailure, std::string("signals: ") + e.what());
  }
}

LoadedKernel Machine::load_guest_kernel() {
  // The kernel file may be larger than RAM (an ELF vmlinux carries its symbols, which are not
  // loaded); 3 GiB bounds any file. An initrd goes whole into guest RAM, so RAM bounds it.
  const MappedFile kernel =
      MappedFile::open("--kernel", config_.kernel_path, ExitCode::kBadKernel,
                       {GuestRamMapping::kMaxBytes, ExitCode::kBadKernel, "the largest guest RAM"});
  MappedFile initrd;
  if (!config_.initrd_path.empty()) {
    // Too big for RAM is a question of --memory, not a bad file.
    initrd = MappedFile::open("--initrd", config_.initrd_path, ExitCode::kBadKernel,
                              {config_.memory_bytes, ExitCode::kUsage, "the guest RAM (--memory)"});
  }
  const std::string cmdline = boot_cmdline(config_);
  LoadedKernel k;
  {
    const TruncationGuard guard{&kernel, &initrd};
    try {
      k = load_kernel(ram_.memory(), kernel.bytes(), cmdline, initrd.bytes(), config_.cpus,
                      config_.kernel_path);
    } catch (const VmmError& e) {
      if (e.code() != ExitCode::kUsage || cmdline.size() == config_.cmdline.size() ||
          std::string(e.what()).rfind("--cmdline", 0) != 0) {
        throw;
      }
      // The user's words fit on their own: say what minivmm added to them.
      throw VmmError(ExitCode::kUsage,
                     std::string(e.what()) + " (" +
                         std::to_string(cmdline.size() - config_.cmdline.size()) +
                         " bytes of it are the virtio_mmio.device= words for the virtio devices)");
    }
    if (const MappedFile* f = guard.truncated()) {
      throw VmmError(ExitCode::kBadKernel, "'" + f->path() + "' shrank while it was being loaded");
    }
  }
  return k;  // the mappings go here: guest RAM holds what the guest needs
}

std::unique_ptr<ControlSocket> Machine::make_control_socket() {
  if (config_.api_socket.empty()) return nullptr;
  // The handlers reach the vCPU and the report, which exist only later: they run on the loop
  // thread, from run(), never during construction.
  ControlHandlers handlers;
  handlers.stats = [this] { return collect_report().to_json(); };
  handlers.pause = [this] {
    if (paused()) return false;
    pause();
    return true;
  };
  handlers.resume = [this] {
    if (!paused()) return false;
    resume();
    return true;
  };
  handlers.quit = [this] { request_stop(ExitCode::kOk, "quit from the control socket"); };
  try {
    return std::make_unique<ControlSocket>(*loop_, rt_timers_, config_.api_socket,
                                           std::move(handlers));
  } catch (const std::invalid_argument& e) {
    throw VmmError(ExitCode::kUsage, std::string("--api-socket: ") + e.what());
  } catch (const std::system_error& e) {
    // A path the user can fix (missing folder, no permission, read-only, taken) is a usage
    // error; running out of fds or memory is the host's.
    const int err = e.code().value();
    const bool users = err == ENOENT || err == ENOTDIR || err == EACCES || err == EPERM ||
                       err == EROFS || err == ELOOP || err == ENAMETOOLONG || err == EADDRINUSE;
    throw VmmError(users ? ExitCode::kUsage : ExitCode::kHostFailure,
                   std::string("--api-socket: ") + e.what());
  }
}

Machine::~Machine() {
  stop_signals_.reset();
  for (auto& v : vcpus_) v->request_stop();
  for (auto& v : vcpus_) v->join();
}

void Machine::flush_guest_page(std::uint64_t page_gpa) noexcept {
  const devices::GuestMemory mem = vm_.memory();
  if (!mem.contains(page_gpa, kTestdevPageBytes)) {
    // QEMU maps nothing for an address outside RAM and does nothing; so do we, counted.
    flushes_outside_ram_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  // QEMU takes the page away (PROT_NONE) and gives it back. Read-only is enough to make the
  // kernel invalidate KVM's mapping of it (mprotect runs the MMU notifiers), and another vCPU
  // that reads the page in between does not fault.
  void* host = mem.slice(page_gpa, kTestdevPageBytes).data();
  if (::mprotect(host, kTestdevPageBytes, PROT_READ) != 0 ||
      ::mprotect(host, kTestdevPageBytes, PROT_READ | PROT_WRITE) != 0) {
    log::warn("pc-testdev: flush of page {:#x}: mprotect: {}", page_gpa, std::strerror(errno));
  }
}

SeccompFacts Machine::seccomp_facts() const {
  SeccompFacts f;
  f.vm_fd = vm_.fd();
  f.pit_tick_vcpu = config_.pit == PitMode::kUser && config_.pit_tick == PitTick::kVcpu;
  f.pit_tick_kernel = config_.pit == PitMode::kUser && config_.pit_tick == PitTick::kKernel;
  f.alarm_posix_timer = config_.alarm == timers::AlarmKind::kDynticks;
  f.alarm_timerfd =
      config_.alarm == timers::AlarmKind::kTimerfd || config_.alarm == timers::AlarmKind::kPeriodic;
  using loop::PollerKind;
  f.poll_ppoll = config_.poller == PollerKind::kPpoll || config_.poller == PollerKind::kAuto;
  f.poll_epoll = config_.poller != PollerKind::kPpoll;
  f.poll_timerfd =
      config_.poller == PollerKind::kTimerfdEpoll || config_.poller == PollerKind::kAuto;
  f.control_socket = !config_.api_socket.empty();
#ifdef MINIVMM_SANITIZER_RUNTIME
  f.sanitizer_runtime = true;
#endif
  return f;
}

void Machine::on_signal(int signo) {
  if (signo == SIGINT) request_stop(ExitCode::kSigint, "interrupted (SIGINT)");
  if (signo == SIGTERM) request_stop(ExitCode::kSigterm, "terminated (SIGTERM)");
  // A closed terminal or a logged-out session: nobody is left to read the console or press
  // Ctrl-A x, so end the run in order (summary, stats, terminal restored) like SIGTERM.
  if (signo == SIGHUP) request_stop(ExitCode::kSighup, "hang-up (SIGHUP)");
  if (signo == SIGTSTP) {
    // Ctrl-Z reaches us only as `kill -TSTP` or with a cooked terminal (raw mode turns ISIG
    // off: Ctrl-Z is the guest's). Give the shell its terminal back, then stop as the default
    // action would; the guest's clock runs on, and its missed ticks follow --lost-ticks.
    devices::ConsoleInput::restore_terminal();
    ::kill(::getpid(), SIGSTOP);
  }
  if (signo == SIGCONT) {
    // Raw again, but only in the foreground: tcsetattr from a background job would stop us
    // with SIGTTOU.
    if (::tcgetpgrp(STDIN_FILENO) == ::getpgrp()) devices::ConsoleInput::reapply_raw_mode();
  }
}

void Machine::request_stop(ExitCode code, const std::string& why) {
  request_stop_status(to_int(code), why);
}

void Machine::request_stop_status(int status, const std::string& why) {
  {
    std::lock_guard lock(stop_mu_);
    if (stop_requested_.exchange(true)) return;
    exit_status_ = status;
    exit_reason_ = why;
  }
  for (auto& v : vcpus_) v->request_stop();
  loop_->stop();
}

void Machine::pause() {
  if (vm_clock_.paused()) return;
  for (auto& v : vcpus_) v->pause();
  // Before vm_clock stops: an edge the kernel fired after the stop would be re-armed on resume.
  if (pit_train_) pit_train_->suspend();
  vm_clock_.pause();
  dynticks_->rearm();
}

void Machine::resume() {
  if (!vm_clock_.paused()) return;
  vm_clock_.resume();
  if (pit_train_) pit_train_->resume();
  dynticks_->rearm();
  for (auto& v : vcpus_) v->resume();
}

int Machine::run() {
  loop_tid_.store(::gettid(), std::memory_order_release);
  // This thread is the loop; the vCPU pins itself when it starts.
  pin_thread(pthread_self(), config_.cpu_affinity.loop, "loop");
  if (config_.timer_slack_ns) {
    // Applies to this (the loop) thread's sleeps: ppoll/epoll timeouts and timerfd expiries.
    if (::prctl(PR_SET_TIMERSLACK, static_cast<unsigned long>(*config_.timer_slack_ns), 0, 0,
                0) != 0) {
      throw VmmError(ExitCode::kHostFailure,
                     std::string("PR_SET_TIMERSLACK: ") + std::strerror(errno));
    }
  }
  start_mono_ = mono_.now();
  start_vm_ = vm_clock_.now();
  if (config_.duration_s) {
    duration_timer_.arm_at(start_mono_ +
                           timers::Nanos{static_cast<std::int64_t>(*config_.duration_s * 1e9)});
  }
  // The seccomp sandbox (seccomp_sandbox.h has the install order): the signal thread and the
  // virtio-blk workers filtered themselves as they started; wait until they have, so that a
  // failure ends the run before the guest starts. Then the vCPUs, which filter themselves
  // before their first KVM_RUN, and this thread's own filter last: it starts no thread after.
  sandbox_.wait_entered(ThreadKind::kSignals, 1);
  sandbox_.wait_entered(ThreadKind::kBlkWorker, blk_workers_);
  if (const auto why = sandbox_.failure()) throw VmmError(ExitCode::kHostFailure, *why);
  for (auto& v : vcpus_) v->start();
  if (!sandbox_.try_enter(ThreadKind::kLoop, loop_allow_list(seccomp_facts_))) {
    request_stop(ExitCode::kHostFailure, "the loop thread could not be sandboxed");
  }
  const bool ok = loop_->run();
  if (!ok) {
    log::error("main loop failed: {}", std::strerror(errno));
    request_stop(ExitCode::kHostFailure, "main loop failed");
  }
  for (auto& v : vcpus_) v->request_stop();
  for (auto& v : vcpus_) v->join();
  uart_.flush();
  // Output a capped transmit turn left for a bottom half the stopped loop will not run.
  if (virtio_console_ != nullptr) virtio_console_->flush_transmit();
  console_input_.reset();  // restores the terminal before the summary is printed
  report_ = collect_report();
  std::lock_guard lock(stop_mu_);
  return exit_status_;
}

RunReport Machine::collect_report() const {
  RunReport r;
  r.kernel = config_.kernel_path;
  r.cmdline = config_.cmdline;
  r.pit_mode = config_.pit == PitMode::kUser ? "user" : "kvm";
  if (pit_) {
    r.pit_tick = config_.pit_tick == PitTick::kVcpu     ? "vcpu"
                 : config_.pit_tick == PitTick::kKernel ? "kernel"
                                                        : "loop";
    r.irq_inject = irq0_.inject() == IrqInject::kIoctl ? "ioctl" : "irqfd";
  }
  r.alarm = std::string(timers::alarm_kind_name(config_.alarm));
  r.poller = std::string(loop::poller_kind_name(config_.poller));
  {
    std::lock_guard lock(stop_mu_);
    r.exit_reason = exit_reason_;
    r.exit_code = exit_status_;
  }
  const timers::Nanos now = mono_.now();
  r.wall_seconds = seconds(now - start_mono_);
  r.vm_seconds = seconds(vm_clock_.from_monotonic(now) - start_vm_);
  r.paused_seconds = r.wall_seconds - r.vm_seconds;

  if (pit_) {
    const auto s = pit_->stats();
    r.ticks_injected = s.ticks_injected;
    r.ticks_lost = s.ticks_lost;
    r.ticks_late = s.ticks_late;
    r.ticks_coalesced = s.ticks_coalesced;
    r.ticks_merged = s.ticks_merged;
    if (r.vm_seconds > 0) r.guest_hz_measured = static_cast<double>(s.ticks_injected) / r.vm_seconds;
  }

  const auto& ls = loop_->stats();
  r.loop_iterations = ls.iterations;
  r.loop_timeouts = ls.timeouts;
  r.fd_dispatches = ls.fd_dispatches;
  r.wake_events = ls.wake_events;
  const auto& ds = dynticks_->stats();
  r.timer_passes = ds.passes;
  r.timers_run = ds.timers_run;
  r.alarm_arms = ds.arms;
  r.alarm_arms_skipped = ds.arms_skipped;
  r.alarm_disarms = ds.disarms;
  r.alarm_wakeups = ds.alarm_wakeups;
  r.false_wakeups = ds.false_wakeups;
  r.cancelled_wakeups = ds.cancelled_wakeups;
  r.clamped_deadlines = ds.clamped;
  r.clock_reads = timers::clock_read_counter().load();
  if (ds.alarm_wakeups) {
    r.alarm_late_us_avg =
        static_cast<double>(ds.late_ns_total) / 1e3 / static_cast<double>(ds.alarm_wakeups);
  }
  r.alarm_late_us_max = static_cast<double>(ds.late_ns_max) / 1e3;
  r.timer_slack_ns = config_.timer_slack_ns;
  r.paused = vm_clock_.paused();

  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  r.cpu_user_seconds = seconds(ru.ru_utime);
  r.cpu_sys_seconds = seconds(ru.ru_stime);
  r.voluntary_ctx_switches = static_cast<std::uint64_t>(ru.ru_nvcsw);
  r.involuntary_ctx_switches = static_cast<std::uint64_t>(ru.ru_nivcsw);
  if (const auto mem = read_process_memory()) {
    r.rss_bytes = mem->rss_bytes;
    r.peak_rss_bytes = mem->peak_rss_bytes;
    r.anon_bytes = mem->anon_bytes;
    r.pss_bytes = mem->pss_bytes;
  }
  r.guest_ram_resident_bytes = ram_.resident_bytes();
  if (const pid_t loop_tid = loop_tid_.load(std::memory_order_acquire); loop_tid != 0) {
    if (const auto c = thread_context_switches(loop_tid)) r.thread_ctx_switches["loop"] = *c;
  }
  for (const auto& v : vcpus_) {
    r.thread_ctx_switches["vcpu" + std::to_string(v->index())] = v->stats().ctx_switches;
  }

  for (std::size_t i = 0; i < static_cast<std::size_t>(timers::Syscall::kCount); ++i) {
    const auto s = static_cast<timers::Syscall>(i);
    r.loop_syscalls[std::string(timers::syscall_name(s))] = timers::loop_syscalls().get(s);
    r.vcpu_syscalls[std::string(timers::syscall_name(s))] = timers::vcpu_syscalls().get(s);
  }
  if (vcpu_timers_) {
    const auto t = vcpu_timers_->stats();
    const auto& p = t.passes;
    r.vcpu_timers = {{"passes", p.passes},
                     {"timers_run", p.timers_run},
                     {"clock_reads", p.clock_reads},
                     {"alarm_arms", p.arms},
                     {"alarm_arms_skipped", p.arms_skipped},
                     {"alarm_disarms", p.disarms},
                     {"alarm_wakeups", p.alarm_wakeups},
                     {"false_wakeups", p.false_wakeups},
                     {"cancelled_wakeups", p.cancelled_wakeups},
                     {"clamped_deadlines", p.clamped},
                     {"cross_thread_wakes", p.cross_thread_wakes},
                     {"kvm_run_interruptions", t.interruptions},
                     {"timer_signals_taken", t.signals_taken}};
  }
  {
    const auto u = uart_.stats();
    r.devices["uart"] = {{"bytes_out", u.bytes_out}, {"sink_writes", u.sink_writes},
                         {"bytes_in", u.bytes_in}, {"rx_overruns", u.rx_overruns},
                         {"rx_timeouts", u.rx_timeouts}, {"bad_accesses", u.bad_accesses}};
    if (pit_) {
      const auto p = pit_->stats();
      r.devices["pit"] = {{"ticks_injected", p.ticks_injected}, {"ticks_late", p.ticks_late},
                          {"ticks_lost", p.ticks_lost}, {"ticks_coalesced", p.ticks_coalesced},
                          {"ticks_owed", p.ticks_owed}, {"reprogrammings", p.reprogrammings},
                          {"period_clamps", p.period_clamps}, {"timer_arms", p.timer_arms},
                          {"train_starts", p.train_starts}, {"bad_accesses", p.bad_accesses},
                          {"ticks_merged", p.ticks_merged}, {"ticks_injected_by_pit", p.ticks_injected_by_pit},
                          {"ack_audits", p.ack_audits},
                          {"acks_abandoned", p.acks_abandoned}};
      if (pit_train_) {
        const auto t = pit_train_->stats();
        r.devices["pit"]["kernel_train"] = {
            {"delivered", t.delivered}, {"generations", t.generations},
            {"refills", t.refills},     {"polls_submitted", t.polls_submitted},
            {"missed", t.missed},       {"failures", t.failures}};
      }
    }
    const auto rt = rtc_.stats();
    r.devices["rtc"] = {{"periodic_irqs", rt.periodic_irqs}, {"alarm_irqs", rt.alarm_irqs},
                        {"update_irqs", rt.update_irqs}, {"reg_c_reads", rt.reg_c_reads},
                        {"timer_arms", rt.timer_arms}, {"bad_accesses", rt.bad_accesses}};
    const auto k = i8042_.stats();
    r.devices["i8042"] = {{"reads", k.reads},
                          {"writes", k.writes},
                          {"reset_requests", k.reset_requests},
                          {"unknown_commands", k.unknown_commands},
                          {"keyboard_bytes", k.keyboard_bytes},
                          {"keyboard_unknown", k.keyboard_unknown},
                          {"keyboard_overruns", k.keyboard_overruns},
                          {"mouse_bytes_dropped", k.device_bytes_dropped},
                          {"bad_accesses", k.bad_accesses}};
    const auto con = console_sink_.stats();
    r.devices["console"] = {{"writes", con.writes}, {"bytes", con.bytes},
                            {"dropped_bytes", con.dropped_bytes}, {"errors", con.errors},
                            {"gone", con.gone}};
    r.devices["debug_exit"] = {{"exit_requests", debug_exit_.exit_requests()}};
    r.devices["post_port"] = {{"writes", post_port_.writes()}};
    if (config_.testdev) {
      const auto fc = fw_cfg_.stats();
      r.devices["fw_cfg"] = {{"selects", fc.selects},
                             {"unknown_selects", fc.unknown_selects},
                             {"data_reads", fc.data_reads},
                             {"reads_past_end", fc.reads_past_end},
                             {"ignored_writes", fc.ignored_writes},
                             {"bad_accesses", fc.bad_accesses}};
      const auto ti = testdev_irq_->stats();
      r.devices["pc_testdev"] = {
          {"echo_bad_accesses", testdev_port_.bad_accesses()},
          {"page_flushes", testdev_flush_.flushes()},
          {"page_flushes_outside_ram", flushes_outside_ram_.load(std::memory_order_relaxed)},
          {"flush_bad_accesses", testdev_flush_.bad_accesses()},
          {"irq_raises", ti.raises},
          {"irq_lowers", ti.lowers},
          {"irq_bad_accesses", ti.bad_accesses},
          {"iomem_reads", testdev_iomem_.reads()},
          {"iomem_writes", testdev_iomem_.writes()},
          {"iomem_bad_accesses", testdev_iomem_.bad_accesses()}};
    }
    nlohmann::json unmapped = nlohmann::json::object();
    for (const auto& u2 : bus_.unmapped()) {
      unmapped[fmt::format("{:#06x}", u2.port)] = {{"reads", u2.reads}, {"writes", u2.writes}};
    }
    r.devices["unmapped_ports"] = unmapped;
    const auto mm = mmio_bus_.stats();
    r.devices["unmapped_mmio"] = {{"reads", mm.unmapped_reads}, {"writes", mm.unmapped_writes},
                                  {"bad_width", mm.bad_width}};
    if (virtio_) {
      const nlohmann::json transports = virtio_->stats_json();
      for (auto it = transports.begin(); it != transports.end(); ++it) {
        r.devices["virtio_" + it.key()] = it.value();
      }
      for (std::size_t i = 0; i < virtio_blks_.size(); ++i) {
        const auto b = virtio_blks_[i]->stats();
        nlohmann::json errors = nlohmann::json::object();
        for (std::size_t e = 1; e < b.errors.size(); ++e) {
          if (b.errors[e] != 0) {
            errors[std::string(devices::blk_error_name(static_cast<devices::BlkError>(e)))] =
                b.errors[e];
          }
        }
        auto& dev = r.devices["virtio_blk" + std::to_string(i)];
        dev["engine"] = std::string(virtio_blks_[i]->engine());
        if (virtio_blks_[i]->engine() == "io_uring") {
          dev["io_uring"] = {{"requests", b.uring_requests},
                             {"submits", b.uring_submits},
                             {"resubmits", b.uring_resubmits},
                             {"submit_errors", b.uring_submit_errors}};
        }
        dev["requests"] = {
            {"reads", b.reads},           {"writes", b.writes},
            {"flushes", b.flushes},       {"get_ids", b.get_ids},
            {"discards", b.discards},     {"bytes_read", b.bytes_read},
            {"bytes_written", b.bytes_written}, {"bytes_discarded", b.bytes_discarded},
            {"io_errors", b.io_errors},   {"unanswerable", b.unanswerable},
            {"write_syncs", b.write_syncs},
            {"cancelled", b.cancelled},   {"errors", errors}};
      }
      if (virtio_console_ != nullptr) {
        const auto c = virtio_console_->stats();
        r.devices["virtio_console"]["data"] = {{"tx_chains", c.tx_chains}, {"tx_bytes", c.tx_bytes},
                                               {"rx_chains", c.rx_chains}, {"rx_bytes", c.rx_bytes},
                                               {"rx_full", c.rx_full}, {"tx_capped", c.tx_capped},
                                               {"tx_resumes", c.tx_resumes}};
      }
    }
  }
  if (control_) r.api_socket = control_->stats_json();
  {
    const SeccompStats ss = sandbox_.stats();
    nlohmann::json threads = nlohmann::json::object();
    for (const ThreadKind k : kThreadKinds) {
      const auto& ks = ss.kinds[static_cast<std::size_t>(k)];
      threads[std::string(thread_kind_name(k))] = {{"filters", ks.filters}, {"rules", ks.rules}};
    }
    r.seccomp = {{"mode", std::string(seccomp_mode_name(ss.mode))}, {"threads", threads}};
  }
  if (auto* ap = dynamic_cast<loop::AutoPoller*>(&loop_->poller())) {
    const auto s = ap->stats();
    nlohmann::json log = nlohmann::json::array();
    for (const auto& d : ap->decisions()) {
      log.push_back({{"wait", d.wait_index},
                     {"from", std::string(loop::poller_kind_name(d.from))},
                     {"to", std::string(loop::poller_kind_name(d.to))},
                     {"from_ns", d.from_cost.count()},
                     {"to_ns", d.to_cost.count()},
                     {"fds", d.fds},
                     {"trigger", std::string(loop::auto_trigger_name(d.trigger))},
                     {"reason", std::string(loop::auto_reason_name(d.reason))}});
    }
    r.auto_poller = {{"active", std::string(loop::poller_kind_name(s.active))},
                     {"waits", s.waits},
                     {"measured_waits", s.measured_waits},
                     {"trials", s.samples},
                     {"switches", s.switches},
                     {"aborted_trials", s.aborted_trials},
                     {"ppoll_wait_ns", s.ppoll_cost.count()},
                     {"epoll_wait_ns", s.epoll_cost.count()},
                     {"trial_interval", s.trial_interval},
                     {"decisions", log}};
  }
  // Every vCPU's exits, summed: the report's totals cover the whole VM.
  VcpuStats vs;
  for (const auto& v : vcpus_) {
    const VcpuStats one = v->stats();
    vs.kvm_run_calls += one.kvm_run_calls;
    for (std::size_t i = 0; i < vs.exits.size(); ++i) vs.exits[i] += one.exits[i];
  }
  r.vcpus = static_cast<std::uint32_t>(vcpus_.size());
  r.kvm_run_calls = vs.kvm_run_calls;
  r.console_writes = console_sink_.stats().writes;
  for (std::size_t i = 0; i < vs.exits.size(); ++i) {
    r.kvm_exits[std::string(vcpu_exit_name(static_cast<VcpuExit>(i)))] = vs.exits[i];
  }
  return r;
}

}  // namespace minivmm::vmm
