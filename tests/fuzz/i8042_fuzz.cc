// libFuzzer target: the i8042 keyboard controller and its one-port views, fed a stream of port
// accesses, time advances and host calls (input format: fuzz_ops.h; what is checked: i8042_rig.h).
#include "tests/fuzz/fuzz_target.h"
#include "tests/fuzz/i8042_rig.h"

MINIVMM_DEVICE_FUZZ_TARGET(I8042Rig)
