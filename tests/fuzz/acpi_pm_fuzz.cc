// libFuzzer target: the ACPI PM block, fed a stream of port accesses, time advances and wakes
// (input format: fuzz_ops.h; what is checked: acpi_pm_rig.h).
#include "tests/fuzz/acpi_pm_rig.h"
#include "tests/fuzz/fuzz_target.h"

MINIVMM_DEVICE_FUZZ_TARGET(AcpiPmRig)
