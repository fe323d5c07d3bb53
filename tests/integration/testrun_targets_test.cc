// Where `minivmm test` writes, and what it refuses to write over (issue 31, item 7): every
// report and log goes through vmm::OutputFile, so a device node or a FIFO is written in place
// and never replaced, a block device, a directory or one of the run's inputs is a usage error
// naming it, a reader that is not there is an error instead of a hang, and /dev/full is an
// error and a non-zero exit. Device nodes are made with mknod in a scratch folder, never the
// host's own /dev. The reports that arrive are read by real parsers (python's XML parser for
// JUnit; tests/testrun/check_tap.py, strict and tappy, for TAP).
//
// The run has one kvm-unit-tests entry that SKIPs by the suite's own rules (arch = i386), so
// no guest starts and no KVM is needed (BadInput*: label unit); the logs' cases start a child
// and need KVM (BootTestrunTargets*).
#include <gtest/gtest.h>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "run_minivmm.h"
#include "testrun_support.h"

namespace minivmm::testing {
namespace {





// check_tap.py on `path` with NAME=VERDICT expectations.

mode_t type_of(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 ? (st.st_mode & S_IFMT) : 0;
}

dev_t rdev_of(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 ? st.st_rdev : 0;
}

int entries_in(const std::string& dir) {
  int n = 0;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) n += e->d_name[0] != '.' || (e->d_name[1] && e->d_name[1] != '.');
    ::closedir(d);
  }
  return n;
}

// A kvm-unit-tests tree whose one entry SKIPs without a guest. Its kernel is a regular file of
// its own (never the build's guest: a broken check would rename a report onto it).
void make_skip_suite(const std::string& dir) {
  ::mkdir((dir + "/x86").c_str(), 0755);
  spit(dir + "/config.mak", "ARCH=x86_64\nTEST_DIR=x86\nERRATATXT=\n");
  spit(dir + "/x86/unittests.cfg", "[only_i386]\nfile = k.flat\narch = i386\n");
  spit(dir + "/x86/k.flat", "not a kernel");
}

enum class Kind {
  kCharNull,      // mknod c 1 3: a /dev/null of the scratch folder's own
  kCharFull,      // mknod c 1 7: /dev/full
  kBlock,         // mknod b 7 250: a loop device node (never opened)
  kFifoReader,    // a FIFO with a reader
  kFifoNoReader,  // a FIFO nobody reads
  kDirectory,
  kSymlinkToNull,  // a symbolic link to the scratch null device
  kSymlinkToFile,  // a symbolic link to a regular file
  kDangling,       // a symbolic link to nothing
  kRegular,        // an old report
  kTheCfg,         // the suite's unittests.cfg
  kTheKernel,      // the suite's test kernel
  kTheManifest,    // a --manifest of the same run
  kTheOtherReport  // the file the other report option names
};

struct TargetCase {
  const char* name;
  Kind kind;
  int exit;           // of `minivmm test`
  const char* error;  // part of stderr ("" for none)
};

void PrintTo(const TargetCase& c, std::ostream* os) { *os << c.name; }

class BadInputTestrunTargetTest
    : public ::testing::TestWithParam<std::tuple<TargetCase, const char*>> {};

TEST_P(BadInputTestrunTargetTest, IsWrittenInPlaceOrRefusedNeverReplaced) {
  const auto& [c, option] = GetParam();
  const bool junit = std::string(option) == "--junit";
  TempDir t("targets");
  make_skip_suite(t.path());
  const std::string target = t.path() + "/target";
  const std::string cfg = t.path() + "/x86/unittests.cfg", kernel = t.path() + "/x86/k.flat";
  const std::string manifest = t.path() + "/m.toml";
  spit(manifest, "[[test]]\nname = \"m\"\nkernel = \"" + t.path() + "/missing\"\nexit = 1\n");
  std::vector<std::string> args{"test", "--kvm-unit-tests", t.path()};

  std::string path = target;
  const auto mknod_or_skip = [&](const std::string& p, mode_t type, dev_t dev) {
    if (::mknod(p.c_str(), type | 0666, dev) != 0) {
      GTEST_SKIP() << "mknod " << p << ": " << std::strerror(errno) << " (needs CAP_MKNOD)";
    }
  };
  switch (c.kind) {
    case Kind::kCharNull: mknod_or_skip(target, S_IFCHR, makedev(1, 3)); break;
    case Kind::kCharFull: mknod_or_skip(target, S_IFCHR, makedev(1, 7)); break;
    case Kind::kBlock: mknod_or_skip(target, S_IFBLK, makedev(7, 250)); break;
    case Kind::kFifoReader:
    case Kind::kFifoNoReader: ASSERT_EQ(::mkfifo(target.c_str(), 0600), 0); break;
    case Kind::kDirectory: ASSERT_EQ(::mkdir(target.c_str(), 0755), 0); break;
    case Kind::kSymlinkToNull:
      mknod_or_skip(t.path() + "/null", S_IFCHR, makedev(1, 3));
      ASSERT_EQ(::symlink((t.path() + "/null").c_str(), target.c_str()), 0);
      break;
    case Kind::kSymlinkToFile:
      spit(t.path() + "/real", "old report");
      ASSERT_EQ(::symlink((t.path() + "/real").c_str(), target.c_str()), 0);
      break;
    case Kind::kDangling: ASSERT_EQ(::symlink((t.path() + "/nothing").c_str(), target.c_str()), 0); break;
    case Kind::kRegular: spit(target, "old report"); break;
    case Kind::kTheCfg: path = cfg; break;
    case Kind::kTheKernel: path = kernel; break;
    case Kind::kTheManifest:
      path = manifest;
      args.insert(args.end(), {"--manifest", manifest});
      break;
    case Kind::kTheOtherReport:
      spit(target, "old report");
      args.insert(args.end(), {junit ? "--tap" : "--junit", target});
      break;
  }
  if (::testing::Test::IsSkipped()) return;
  args.insert(args.end(), {option, path});
  const mode_t type_before = type_of(path);
  const std::string cfg_before = slurp(cfg), kernel_before = slurp(kernel),
                    manifest_before = slurp(manifest);

  // The FIFO's reader: open before the run (so the writer finds it), read until the run ends.
  std::atomic<bool> done{false};
  std::string got;
  std::thread reader;
  if (c.kind == Kind::kFifoReader) {
    const int fd = ::open(target.c_str(), O_RDONLY | O_NONBLOCK);
    ASSERT_GE(fd, 0);
    reader = std::thread([fd, &done, &got] {
      char buf[4096];
      for (;;) {
        const ssize_t n = ::read(fd, buf, sizeof buf);
        if (n > 0) {
          got.append(buf, static_cast<std::size_t>(n));
          continue;
        }
        if (done) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      ::close(fd);
    });
  }
  const RunResult r = run_minivmm(args, false, 30);
  done = true;
  if (reader.joinable()) reader.join();

  EXPECT_EQ(r.term_signal, 0) << "hung: killed after 30 s";
  EXPECT_EQ(r.exit_code, c.exit) << r.out << r.err;
  EXPECT_TRUE(has(r.err, c.error)) << r.err;
  if (c.exit == kUsage) {
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "one line\n" << r.err;
    EXPECT_FALSE(has(r.out, "skipped")) << "nothing runs after a usage error\n" << r.out;
  }
  // Never replaced, whatever it is.
  EXPECT_EQ(type_of(path), type_before) << path << " changed its type";
  EXPECT_EQ(slurp(cfg), cfg_before);
  EXPECT_EQ(slurp(kernel), kernel_before);
  EXPECT_EQ(slurp(manifest), manifest_before);
  switch (c.kind) {
    case Kind::kCharNull: EXPECT_EQ(rdev_of(target), makedev(1, 3)); break;
    case Kind::kCharFull: EXPECT_EQ(rdev_of(target), makedev(1, 7)); break;
    case Kind::kBlock: EXPECT_EQ(rdev_of(target), makedev(7, 250)); break;
    case Kind::kSymlinkToNull: EXPECT_EQ(type_of(t.path() + "/null"), S_IFCHR); break;
    default: break;
  }

  // What arrived is a whole, well-formed report.
  std::string written;
  if (c.kind == Kind::kFifoReader) written = got;
  if (c.kind == Kind::kSymlinkToFile) written = slurp(t.path() + "/real");
  if (c.kind == Kind::kRegular) written = slurp(target);
  if (c.kind == Kind::kRegular) {
    // Only what the test made: the suite's files, the manifest and the report; no temporary.
    EXPECT_EQ(entries_in(t.path()), 4) << "a temporary file was left behind";
  }
  if (!written.empty()) {
    const std::string copy = t.path() + "/copy";
    spit(copy, written);
    if (junit) {
      EXPECT_TRUE(xml_parses(copy)) << written;
      EXPECT_TRUE(has(written, "only_i386")) << written;
    } else {
      EXPECT_EQ(check_tap(copy, {"only_i386=SKIP"}), 0) << written;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    BadInputTestrunTargets, BadInputTestrunTargetTest,
    ::testing::Combine(
        ::testing::Values(
            TargetCase{"CharDeviceNull", Kind::kCharNull, 0, ""},
            TargetCase{"CharDeviceFull", Kind::kCharFull, 1, "No space left on device"},
            TargetCase{"BlockDevice", Kind::kBlock, kUsage, "is a block device"},
            TargetCase{"FifoWithReader", Kind::kFifoReader, 0, ""},
            TargetCase{"FifoWithoutReader", Kind::kFifoNoReader, kUsage, "is a FIFO that nobody reads"},
            TargetCase{"Directory", Kind::kDirectory, kUsage, "is a directory"},
            TargetCase{"SymlinkToCharDevice", Kind::kSymlinkToNull, 0, ""},
            TargetCase{"SymlinkToFile", Kind::kSymlinkToFile, 0, ""},
            TargetCase{"DanglingSymlink", Kind::kDangling, kUsage, "is a symbolic link to nothing"},
            TargetCase{"OldReport", Kind::kRegular, 0, ""},
            TargetCase{"TheSuitesCfg", Kind::kTheCfg, kUsage, "is the file given to --kvm-unit-tests"},
            TargetCase{"TheSuitesKernel", Kind::kTheKernel, kUsage,
                       "is the file given to --kvm-unit-tests (a test's kernel)"},
            TargetCase{"TheManifest", Kind::kTheManifest, kUsage, "is the file given to --manifest"},
            TargetCase{"TheOtherReport", Kind::kTheOtherReport, kUsage, "report too"}),
        ::testing::Values("--junit", "--tap")),
    [](const ::testing::TestParamInfo<std::tuple<TargetCase, const char*>>& p) {
      return std::string(std::get<0>(p.param).name) +
             (std::string(std::get<1>(p.param)) == "--junit" ? "Junit" : "Tap");
    });

// The logs folder's files: a FIFO, a device, a directory or a symbolic link where a test's
// console goes is refused for that test (it fails, saying so), never waited on or replaced;
// results.tsv on a device node is written in place.
TEST(BootTestrunTargetsTest, LogsFolderEntriesThatAreNotFilesFailTheirTestAndStayAsTheyWere) {
  SKIP_WITHOUT_KVM();
  TempDir t("targets");
  ::mkdir((t.path() + "/x86").c_str(), 0755);
  spit(t.path() + "/config.mak", "ARCH=x86_64\nTEST_DIR=x86\nERRATATXT=\n");
  // Each entry starts a child (its kernel is junk, so minivmm refuses it at once).
  spit(t.path() + "/x86/unittests.cfg",
       "[fifo]\nfile = k.flat\n[dir]\nfile = k.flat\n[link]\nfile = k.flat\n[null]\nfile = k.flat\n");
  spit(t.path() + "/x86/k.flat", "not a kernel");
  const std::string logs = t.path() + "/logs";
  ASSERT_EQ(::mkdir(logs.c_str(), 0755), 0);
  ASSERT_EQ(::mkfifo((logs + "/fifo.log").c_str(), 0600), 0);
  ASSERT_EQ(::mkdir((logs + "/dir.stderr").c_str(), 0755), 0);
  spit(t.path() + "/precious", "precious");
  ASSERT_EQ(::symlink((t.path() + "/precious").c_str(), (logs + "/link.log").c_str()), 0);
  const bool devices = ::mknod((logs + "/null.log").c_str(), S_IFCHR | 0666, makedev(1, 3)) == 0 &&
                       ::mknod((logs + "/results.tsv").c_str(), S_IFCHR | 0666, makedev(1, 3)) == 0;

  const RunResult r =
      run_minivmm({"test", "--kvm-unit-tests", t.path(), "-j", "2", "--logs", logs}, false, 60);
  EXPECT_EQ(r.term_signal, 0) << "hung on a log's open";
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_TRUE(has(r.out, "is a FIFO; a log is a regular file of the logs folder")) << r.out;
  EXPECT_TRUE(has(r.out, "is a directory; a log is a regular file of the logs folder")) << r.out;
  EXPECT_TRUE(has(r.out, "is a symbolic link; a log is a regular file")) << r.out;
  EXPECT_EQ(type_of(logs + "/fifo.log"), S_IFIFO);
  EXPECT_EQ(type_of(logs + "/dir.stderr"), S_IFDIR);
  EXPECT_EQ(type_of(logs + "/link.log"), S_IFLNK);
  EXPECT_EQ(slurp(t.path() + "/precious"), "precious");
  if (devices) {
    EXPECT_TRUE(has(r.out, "is a character device; a log is a regular file")) << r.out;
    EXPECT_EQ(type_of(logs + "/null.log"), S_IFCHR);
    EXPECT_EQ(type_of(logs + "/results.tsv"), S_IFCHR) << "results.tsv replaced a device node";
  }
}

}  // namespace
}  // namespace minivmm::testing
