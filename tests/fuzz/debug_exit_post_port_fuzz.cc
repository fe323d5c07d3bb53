// libFuzzer target: isa-debug-exit and the POST code port, fed a stream of port accesses, time
// advances and host calls (input format: fuzz_ops.h; what is checked: debug_exit_post_port_rig.h).
#include "tests/fuzz/debug_exit_post_port_rig.h"
#include "tests/fuzz/fuzz_target.h"

MINIVMM_DEVICE_FUZZ_TARGET(DebugPortsRig)
