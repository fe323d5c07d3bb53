#include "devices/testdev/pc_testdev.h"

#include <utility>

namespace minivmm::devices {

PcTestdev::PcTestdev(const std::array<IrqLine*, PcTestdevIrq::kLines>& lines, FlushPage flush)
    : flush_(std::move(flush)),
      flush_page_([this](std::uint64_t page_gpa) {
        if (flush_ && !flush_(page_gpa)) {
          flushes_outside_ram_.fetch_add(1, std::memory_order_relaxed);
        }
      }),
      irq_(lines) {}

void PcTestdev::report(ReportWriter& out) const {
  const PcTestdevIrqStats irq = irq_.stats();
  out.count("echo_bad_accesses", echo_.bad_accesses());
  out.count("page_flushes", flush_page_.flushes());
  out.count("page_flushes_outside_ram", page_flushes_outside_ram());
  out.count("flush_bad_accesses", flush_page_.bad_accesses());
  out.count("irq_raises", irq.raises);
  out.count("irq_lowers", irq.lowers);
  out.count("irq_bad_accesses", irq.bad_accesses);
  out.count("iomem_reads", iomem_.reads());
  out.count("iomem_writes", iomem_.writes());
  out.count("iomem_bad_accesses", iomem_.bad_accesses());
}

}  // namespace minivmm::devices
