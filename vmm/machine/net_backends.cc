#include "vmm/machine/net_backends.h"

#include <string>

#include "devices/host/slirp_backend.h"
#include "devices/host/tap_backend.h"
#include "vmm/vmm_error.h"

namespace minivmm::vmm {

NetBackends::NetBackends(const Config& config, MachineLoop& loop) {
  for (const NetSpec& n : config.nets) {
    try {
      switch (n.kind) {
        case NetSpec::Kind::kTap:
          backends_.push_back(devices::TapBackend::open(*loop.loop, n.ifname));
          ++taps_;
          break;
        case NetSpec::Kind::kTapFd:
          backends_.push_back(devices::TapBackend::adopt(*loop.loop, n.fd));
          ++taps_;
          break;
        case NetSpec::Kind::kUser:
          backends_.push_back(devices::SlirpBackend::create(*loop.loop, loop.loop_rt_timers,
                                                            devices::SlirpOptions{n.forwards}));
          ++users_;
          break;
      }
    } catch (const devices::NetBackendError& e) {
      throw VmmError(ExitCode::kUsage, "--net " + n.text + ": " + e.what());
    }
  }
}

}  // namespace minivmm::vmm
