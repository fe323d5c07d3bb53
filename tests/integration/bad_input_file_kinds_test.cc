// Issue 31: every file the VMM opens, given a node that is not a file: a FIFO nobody writes, a
// listening socket, a directory, a character device, and a symlink to the FIFO. Each is refused
// with one line and its exit code, at once: the VMM sets up with its stop signals blocked, so an
// open() that waited (a FIFO without a writer) could be ended by nothing but SIGKILL. A run that
// is still going after 20 s is a hang, and fails here.
//
// For: --kernel, --initrd, --drive, --restore, --restore-drive N=, and a drive path recorded in
// the snapshot. (--stats and minivmm test's reports are written, not read: output_target_test.cc.)
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "run_minivmm.h"
#include "test_snapshot.h"
#include "tests/support/unix_socket.h"

namespace minivmm::testing {
namespace {

enum class Node { kFifo, kSocket, kDirectory, kCharDevice, kSymlinkToFifo };

const char* node_name(Node n) {
  switch (n) {
    case Node::kFifo: return "fifo";
    case Node::kSocket: return "socket";
    case Node::kDirectory: return "directory";
    case Node::kCharDevice: return "chardev";
    case Node::kSymlinkToFifo: return "symlink_to_fifo";
  }
  return "?";
}

// The read-only drives are the ones a FIFO blocked (O_RDONLY waits for a writer; O_RDWR does
// not): minivmm at 2219ee4 hung on each of them until SIGKILL.
enum class Input {
  kKernel,
  kInitrd,
  kDrive,
  kDriveReadOnly,
  kRestore,
  kRestoreDrive,
  kRestoreDriveReadOnly,
  kSnapshotDrive,
  kSnapshotDriveReadOnly
};

const char* input_name(Input i) {
  switch (i) {
    case Input::kKernel: return "kernel";
    case Input::kInitrd: return "initrd";
    case Input::kDrive: return "drive";
    case Input::kDriveReadOnly: return "drive_ro";
    case Input::kRestore: return "restore";
    case Input::kRestoreDrive: return "restore_drive";
    case Input::kRestoreDriveReadOnly: return "restore_drive_ro";
    case Input::kSnapshotDrive: return "snapshot_drive";
    case Input::kSnapshotDriveReadOnly: return "snapshot_drive_ro";
  }
  return "?";
}

class Scratch {
 public:
  Scratch() {
    char tmpl[] = "/tmp/minivmm-kinds-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
  }
  ~Scratch() {
    if (sock_ >= 0) ::close(sock_);
    for (const std::string& p : made_) ::unlink(p.c_str()) == 0 || ::rmdir(p.c_str());
    ::rmdir(dir_.c_str());
  }
  // The node, or "" with `why` when this host will not make it (mknod needs CAP_MKNOD).
  std::string make(Node n, std::string& why) {
    const std::string p = dir_ + "/" + node_name(n);
    int r = 0;
    switch (n) {
      case Node::kFifo: r = ::mkfifo(p.c_str(), 0600); break;
      case Node::kSocket: {
        sock_ = unix_bind(p, 1);
        r = sock_ < 0 ? -1 : 0;
        break;
      }
      case Node::kDirectory: r = ::mkdir(p.c_str(), 0700); break;
      // /dev/null's numbers, made in the scratch folder (never the host's own /dev).
      case Node::kCharDevice: r = ::mknod(p.c_str(), S_IFCHR | 0600, makedev(1, 3)); break;
      case Node::kSymlinkToFifo: {
        const std::string target = dir_ + "/target-fifo";
        r = ::mkfifo(target.c_str(), 0600);
        if (r == 0) made_.push_back(target);
        if (r == 0) r = ::symlink(target.c_str(), p.c_str());
        break;
      }
    }
    if (r != 0) {
      why = std::string(node_name(n)) + ": " + std::strerror(errno);
      return "";
    }
    made_.push_back(p);
    return p;
  }
  std::string file(const std::string& name, std::size_t bytes) {
    const std::string p = dir_ + "/" + name;
    std::ofstream(p, std::ios::binary) << std::string(bytes, 'x');
    made_.push_back(p);
    return p;
  }

 private:
  std::string dir_;
  std::vector<std::string> made_;
  int sock_ = -1;
};

using Case = std::tuple<Input, Node>;

class BadInputFileKindsTest : public ::testing::TestWithParam<Case> {};

TEST_P(BadInputFileKindsTest, IsRefusedAtOnceWithOneLine) {
  const auto [input, node] = GetParam();
  Scratch scratch;
  std::string why;
  const std::string bad = scratch.make(node, why);
  if (bad.empty()) GTEST_SKIP() << "cannot make the node here: " << why;
  std::vector<std::string> args{"run", "--no-console-input"};
  const std::string snap = scratch.file("s.snap", 0);
  auto write_snapshot = [&](const std::string& drive_path, bool read_only) {
    vmm::Config c;
    vmm::DriveSpec d;
    d.path = drive_path;
    d.read_only = read_only;
    c.drives.push_back(d);
    ASSERT_TRUE(write_test_snapshot(snap, test_snapshot_sections(c, {4096})));
  };
  switch (input) {
    case Input::kKernel: args.insert(args.end(), {"--kernel", bad}); break;
    case Input::kInitrd: args.insert(args.end(), {"--kernel", guest_image(), "--initrd", bad}); break;
    case Input::kDrive: args.insert(args.end(), {"--kernel", guest_image(), "--drive", bad}); break;
    case Input::kDriveReadOnly:
      args.insert(args.end(), {"--kernel", guest_image(), "--drive", bad + ",ro"});
      break;
    case Input::kRestore: args.insert(args.end(), {"--restore", bad}); break;
    case Input::kRestoreDrive:
    case Input::kRestoreDriveReadOnly:
      write_snapshot(scratch.file("disk.img", 4096), input == Input::kRestoreDriveReadOnly);
      args.insert(args.end(), {"--restore", snap, "--restore-drive", "0=" + bad});
      break;
    case Input::kSnapshotDrive:
    case Input::kSnapshotDriveReadOnly:
      write_snapshot(bad, input == Input::kSnapshotDriveReadOnly);
      args.insert(args.end(), {"--restore", snap});
      break;
  }
  const RunResult r = run_minivmm(args, false, 20);
  EXPECT_NE(r.term_signal, SIGKILL) << "hung: still running after 20 s";
  EXPECT_EQ(r.term_signal, 0) << r.err;
  EXPECT_EQ(r.exit_code, kBadKernel) << r.err;
  EXPECT_EQ(line_count(r.err), 1) << r.err;
  EXPECT_TRUE(has(r.err, "not a regular file")) << r.err;
}

INSTANTIATE_TEST_SUITE_P(
    Inputs, BadInputFileKindsTest,
    ::testing::Combine(::testing::Values(Input::kKernel, Input::kInitrd, Input::kDrive,
                                         Input::kDriveReadOnly, Input::kRestore,
                                         Input::kRestoreDrive, Input::kRestoreDriveReadOnly,
                                         Input::kSnapshotDrive, Input::kSnapshotDriveReadOnly),
                       ::testing::Values(Node::kFifo, Node::kSocket, Node::kDirectory,
                                         Node::kCharDevice, Node::kSymlinkToFifo)),
    [](const ::testing::TestParamInfo<Case>& p) {
      return std::string(input_name(std::get<0>(p.param))) + "_" + node_name(std::get<1>(p.param));
    });

}  // namespace
}  // namespace minivmm::testing
