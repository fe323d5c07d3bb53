// libFuzzer target: the MC146818 RTC and CMOS RAM, fed a stream of port accesses, time
// advances and host calls (input format: fuzz_ops.h; what is checked: mc146818_rtc_rig.h).
#include "tests/fuzz/fuzz_target.h"
#include "tests/fuzz/mc146818_rtc_rig.h"

MINIVMM_DEVICE_FUZZ_TARGET(Mc146818RtcRig)
