// libFuzzer target: the 16550 UART (COM1), fed a stream of port accesses, time
// advances and host calls (input format: fuzz_ops.h; what is checked: uart_16550_rig.h).
#include "tests/fuzz/fuzz_target.h"
#include "tests/fuzz/uart_16550_rig.h"

MINIVMM_DEVICE_FUZZ_TARGET(Uart16550Rig)
