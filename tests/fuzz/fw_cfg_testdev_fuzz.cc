// libFuzzer target: fw_cfg and pc-testdev, fed a stream of port accesses (input format:
// fuzz_ops.h; what is checked: fw_cfg_testdev_rig.h).
#include "tests/fuzz/fw_cfg_testdev_rig.h"
#include "tests/fuzz/fuzz_target.h"

MINIVMM_DEVICE_FUZZ_TARGET(FwCfgTestdevRig)
