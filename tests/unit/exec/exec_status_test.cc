// The init's status word through isa-debug-exit's (v << 1) | 1, decoded.
#include "vmm/exec/exec_status.h"

#include <gtest/gtest.h>

#include "devices/pc/debug_exit.h"
#include "guest/exec_init/exec_status.h"
#include "vmm/exit_code.h"
#include "vmm/exec/exec_run.h"

namespace minivmm::vmm::exec {
namespace {

int through_port(unsigned kind, unsigned value) {
  return devices::DebugExit::exit_status(exec_status_word(kind, value));
}

TEST(ExecStatus, CommandStatusPassesThrough) {
  for (const unsigned v : {0u, 1u, 7u, 127u, 255u}) {
    EXPECT_EQ(decode_exec_status(through_port(kStatusExited, v), "").exit_code, static_cast<int>(v));
    EXPECT_TRUE(decode_exec_status(through_port(kStatusExited, v), "").message.empty());
  }
}

TEST(ExecStatus, SignalIs128PlusItsNumber) {
  const auto o = decode_exec_status(through_port(kStatusSignaled, 9), "");
  EXPECT_EQ(o.exit_code, 137);
  EXPECT_NE(o.message.find("SIGKILL"), std::string::npos) << o.message;
}

TEST(ExecStatus, InitFailureSaysWhere) {
  const auto o = decode_exec_status(through_port(kStatusInitFailed, kFailShare), "");
  EXPECT_EQ(o.exit_code, kExecInitFailed);
  EXPECT_NE(o.message.find("--share"), std::string::npos);
  EXPECT_TRUE(o.show_console);
  EXPECT_NE(decode_exec_status(through_port(kStatusInitFailed, 99), "").message.find("unknown (99)"),
            std::string::npos);
}

TEST(ExecStatus, RunOutcomesHaveTheirOwnCodes) {
  EXPECT_EQ(decode_exec_status(kTimeoutRunStatus, "").exit_code, kExecTimeout);
  EXPECT_EQ(decode_exec_status(to_int(ExitCode::kGuestPanicked), "").exit_code, kExecPanic);
  EXPECT_EQ(decode_exec_status(to_int(ExitCode::kOk), "i8042 reset").exit_code, kExecNoStatus);
  EXPECT_EQ(decode_exec_status(to_int(ExitCode::kTripleFault), "").exit_code, kExecNoStatus);
  EXPECT_EQ(decode_exec_status(to_int(ExitCode::kHostFailure), "").exit_code, kExecSetupFailed);
  EXPECT_EQ(decode_exec_status(to_int(ExitCode::kSigterm), "").exit_code, 143);
}

TEST(ExecStatus, OtherDebugExitWritesAreNotACommandStatus) {
  // A guest that is not the init writing a small value (the bundled guest's 1 = success).
  EXPECT_EQ(decode_exec_status(devices::DebugExit::exit_status(0), "").exit_code, kExecNoStatus);
  EXPECT_EQ(decode_exec_status(devices::DebugExit::exit_status(7), "").exit_code, kExecNoStatus);
  EXPECT_EQ(decode_exec_status(devices::DebugExit::exit_status(0xffffffffu), "").exit_code,
            kExecNoStatus);
  // The magic with an unknown kind.
  EXPECT_EQ(decode_exec_status(through_port(9, 1), "").exit_code, kExecNoStatus);
}

TEST(ExecStatus, CodesAreDistinct) {
  const int codes[] = {kExecUsage, kExecSetupFailed, kExecInitFailed, kExecNoStatus, kExecPanic,
                       kExecTimeout};
  for (std::size_t i = 0; i < std::size(codes); ++i) {
    for (std::size_t j = i + 1; j < std::size(codes); ++j) EXPECT_NE(codes[i], codes[j]);
  }
}

TEST(LastLines, KeepsTheTailWithoutCarriageReturns) {
  EXPECT_EQ(last_lines("a\r\nb\r\nc\r\n", 2), "  | b\n  | c\n");
  EXPECT_EQ(last_lines("one", 5), "  | one\n");
  EXPECT_EQ(last_lines("", 5), "");
}

}  // namespace
}  // namespace minivmm::vmm::exec
