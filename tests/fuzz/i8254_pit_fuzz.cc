// libFuzzer target: the 8254 PIT with port 0x61 on the same chip, fed a stream of port accesses,
// time advances and host calls (input format: fuzz_ops.h; what is checked: i8254_pit_rig.h).
#include "tests/fuzz/fuzz_target.h"
#include "tests/fuzz/i8254_pit_rig.h"

MINIVMM_DEVICE_FUZZ_TARGET(I8254PitRig)
