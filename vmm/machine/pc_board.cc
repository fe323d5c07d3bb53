#include "vmm/machine/pc_board.h"

#include <fmt/core.h>

#include "devices/log/log.h"
#include "vmm/exit_code.h"
#include "vmm/machine/board_layout.h"

namespace minivmm::vmm {

PcBoard::PcBoard(const Wiring& w)
    : keyboard_irq_(w.vm.vm, board::kKeyboardGsi),
      com1_irq_(w.vm.vm, board::kCom1Gsi),
      rtc_irq_(w.vm.vm, board::kRtcGsi),
      mouse_irq_(w.vm.vm, board::kMouseGsi),
      uart_(com1_irq_, sink_, &w.loop.loop_rt_timers, &w.loop.loop_vm_timers),
      debug_exit_([stop = w.stop](int status) { stop(status, "guest debug-exit"); }),
      i8042_([stop = w.stop] { stop(to_int(ExitCode::kOk), "guest reset through the i8042"); },
             &keyboard_irq_, &mouse_irq_),
      rtc_(w.loop.loop_vm_timers, w.loop.wall, rtc_irq_, w.config.memory_bytes) {
  io_.attach(board::kCom1.base, board::kCom1.count, uart_);
  io_.attach(board::kDebugExit.base, board::kDebugExit.count, debug_exit_);
  io_.attach(board::kPostPort.base, board::kPostPort.count, post_port_);
  io_.attach(board::kI8042Data.base, board::kI8042Data.count, i8042_.data_port());
  io_.attach(board::kI8042Command.base, board::kI8042Command.count, i8042_.command_port());
  io_.attach(board::kRtc.base, board::kRtc.count, rtc_);
  const bool bios_timer = w.kernel.bios_timer && w.config.pit == PitMode::kUser;
  w.vm.vm.set_pics_as_bios_leaves_them(bios_timer);
  pit_ = std::make_unique<PitAssembly>(PitAssembly::Wiring{
      w.config, w.vm.vm, w.loop, io_, bios_timer, [stop = w.stop](const std::string& why) {
        log::error("{}", why);
        stop(to_int(ExitCode::kHostFailure), why);
      }});
  if (w.config.testdev) testdev_ = std::make_unique<TestdevBoard>(w.config, w.vm.vm, io_, mmio_);
}

void PcBoard::report(nlohmann::json& r) const {
  const auto u = uart_.stats();
  r["uart"] = {{"bytes_out", u.bytes_out},     {"sink_writes", u.sink_writes},
               {"bytes_in", u.bytes_in},       {"rx_overruns", u.rx_overruns},
               {"rx_timeouts", u.rx_timeouts}, {"bad_accesses", u.bad_accesses}};
  if (const devices::I8254Pit* pit = pit_->pit()) {
    const auto p = pit->stats();
    r["pit"] = {{"ticks_injected", p.ticks_injected}, {"ticks_late", p.ticks_late},
                {"ticks_lost", p.ticks_lost}, {"ticks_coalesced", p.ticks_coalesced},
                {"ticks_owed", p.ticks_owed}, {"reprogrammings", p.reprogrammings},
                {"period_clamps", p.period_clamps}, {"timer_arms", p.timer_arms},
                {"train_starts", p.train_starts}, {"bad_accesses", p.bad_accesses},
                {"ticks_merged", p.ticks_merged},
                {"ticks_injected_by_pit", p.ticks_injected_by_pit},
                {"ack_audits", p.ack_audits}, {"acks_abandoned", p.acks_abandoned}};
    if (KernelPulseTrain* train = pit_->train()) {
      const auto t = train->stats();
      r["pit"]["kernel_train"] = {{"delivered", t.delivered}, {"generations", t.generations},
                                  {"refills", t.refills},     {"polls_submitted", t.polls_submitted},
                                  {"missed", t.missed},       {"failures", t.failures}};
    }
  }
  const auto rt = rtc_.stats();
  r["rtc"] = {{"periodic_irqs", rt.periodic_irqs}, {"alarm_irqs", rt.alarm_irqs},
              {"update_irqs", rt.update_irqs},     {"reg_c_reads", rt.reg_c_reads},
              {"timer_arms", rt.timer_arms},       {"bad_accesses", rt.bad_accesses}};
  const auto k = i8042_.stats();
  r["i8042"] = {{"reads", k.reads},
                {"writes", k.writes},
                {"reset_requests", k.reset_requests},
                {"unknown_commands", k.unknown_commands},
                {"keyboard_bytes", k.keyboard_bytes},
                {"keyboard_unknown", k.keyboard_unknown},
                {"keyboard_overruns", k.keyboard_overruns},
                {"mouse_bytes_dropped", k.device_bytes_dropped},
                {"bad_accesses", k.bad_accesses}};
  const auto con = sink_.stats();
  r["console"] = {{"writes", con.writes}, {"bytes", con.bytes},
                  {"dropped_bytes", con.dropped_bytes}, {"errors", con.errors},
                  {"gone", con.gone}};
  r["debug_exit"] = {{"exit_requests", debug_exit_.exit_requests()}};
  r["post_port"] = {{"writes", post_port_.writes()}};
  if (testdev_) testdev_->report(r);
  nlohmann::json unmapped = nlohmann::json::object();
  for (const auto& port : io_.unmapped()) {
    unmapped[fmt::format("{:#06x}", port.port)] = {{"reads", port.reads}, {"writes", port.writes}};
  }
  r["unmapped_ports"] = unmapped;
  const auto mm = mmio_.stats();
  r["unmapped_mmio"] = {{"reads", mm.unmapped_reads}, {"writes", mm.unmapped_writes},
                        {"bad_width", mm.bad_width}};
}

}  // namespace minivmm::vmm
