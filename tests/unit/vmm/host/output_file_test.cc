// OutputFile (vmm/host/output_file.h): what check() refuses, that it touches nothing, and how each
// kind of target is written.
#include "vmm/host/output_file.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "vmm/vmm_error.h"
#include "tests/support/unix_socket.h"

namespace minivmm::vmm {
namespace {

class OutputFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/minivmm-output-file-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    const std::string cmd = "rm -rf '" + dir_ + "'";
    EXPECT_EQ(std::system(cmd.c_str()), 0);
  }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }
  std::string make(const std::string& name, const std::string& text) const {
    std::ofstream(path(name), std::ios::binary) << text;
    return path(name);
  }
  static std::string read(const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  // The exit code and message of check(), or kOk when it passes.
  static std::pair<ExitCode, std::string> judge(const std::string& p,
                                                const std::vector<InputFile>& inputs = {}) {
    try {
      OutputFile::check("--stats", p, inputs);
      return {ExitCode::kOk, ""};
    } catch (const VmmError& e) {
      return {e.code(), e.what()};
    }
  }

  std::string dir_;
};

TEST_F(OutputFileTest, RefusesWhatCannotBeAReport) {
  EXPECT_EQ(judge("").first, ExitCode::kUsage);
  EXPECT_EQ(judge(dir_).first, ExitCode::kUsage);                       // a directory
  EXPECT_EQ(judge(path("no-such-dir/report.json")).first, ExitCode::kUsage);
  EXPECT_EQ(judge(path("sub/")).first, ExitCode::kUsage);
  ASSERT_EQ(::symlink(path("nothing").c_str(), path("dangling").c_str()), 0);
  EXPECT_EQ(judge(path("dangling")).first, ExitCode::kUsage);
  // A socket (the control socket's file, say).
  const std::string sock = path("api.sock");
  const int s = testing::unix_bind(sock, 0);
  ASSERT_GE(s, 0) << std::strerror(errno);
  EXPECT_EQ(judge(sock).first, ExitCode::kUsage);
  ::close(s);
}

TEST_F(OutputFileTest, NeverAnInputUnderAnyName) {
  const std::string kernel = make("bzImage", "kernel bytes");
  ASSERT_EQ(::symlink(kernel.c_str(), path("alias").c_str()), 0);
  ASSERT_EQ(::link(kernel.c_str(), path("hardlink").c_str()), 0);
  const std::vector<InputFile> inputs{{"--kernel", kernel}};
  for (const std::string& p : {kernel, path("alias"), path("hardlink"), dir_ + "/./bzImage"}) {
    const auto [code, why] = judge(p, inputs);
    EXPECT_EQ(code, ExitCode::kUsage) << p;
    EXPECT_NE(why.find("--kernel"), std::string::npos) << why;
  }
  // An input that does not exist yet (the control socket is created later) by its name.
  EXPECT_EQ(judge(path("api.sock"), {{"--api-socket", path("api.sock")}}).first, ExitCode::kUsage);
  EXPECT_EQ(read(kernel), "kernel bytes");
}

// An input folder (exec's --modules): nothing lands in it or below it, by its name, a path with
// `..` or a symbolic link from outside; a folder beside it whose name starts the same is not in it.
TEST_F(OutputFileTest, NeverInAnInputFolder) {
  ASSERT_EQ(::mkdir(path("mods").c_str(), 0755), 0);
  ASSERT_EQ(::mkdir(path("mods/kernel").c_str(), 0755), 0);
  ASSERT_EQ(::mkdir(path("mods2").c_str(), 0755), 0);
  const std::string dep = make("mods/modules.dep", "deps");
  ASSERT_EQ(::symlink(dep.c_str(), path("to-dep").c_str()), 0);
  ASSERT_EQ(::symlink(path("mods/new.json").c_str(), path("to-new").c_str()), 0);
  ASSERT_EQ(::symlink(path("mods").c_str(), path("mods-link").c_str()), 0);
  const std::vector<InputFile> inputs{{"--modules", path("mods"), true}};
  for (const std::string& p : {dep, path("mods/new.json"), path("mods/kernel/x.json"),
                               path("mods2/../mods/y.json"), path("to-dep"),
                               path("mods-link/z.json")}) {
    const auto [code, why] = judge(p, inputs);
    EXPECT_EQ(code, ExitCode::kUsage) << p;
    EXPECT_NE(why.find("the folder given to --modules"), std::string::npos) << why;
  }
  // A link to a file not there yet is refused too, as a link to nothing (it is never followed).
  EXPECT_EQ(judge(path("to-new"), inputs).first, ExitCode::kUsage);
  EXPECT_EQ(judge(path("mods2/report.json"), inputs).first, ExitCode::kOk);
  EXPECT_EQ(judge(path("report.json"), inputs).first, ExitCode::kOk);
  EXPECT_EQ(read(dep), "deps");
}

TEST_F(OutputFileTest, CheckAndOpenTouchNothingAndWriteReplacesTheFileWhole) {
  const std::string report = make("report.json", "old report");
  OutputFile out = OutputFile::check("--stats", report, {});
  EXPECT_EQ(out.kind(), OutputFile::Kind::kRegular);
  out.open();
  EXPECT_EQ(read(report), "old report") << "touched before the end of the run";
  std::string why;
  ASSERT_TRUE(out.write("new report\n", why)) << why;
  EXPECT_EQ(read(report), "new report\n");
  // Nothing else is left in the folder (the temporary file was renamed).
  EXPECT_EQ(::access(path(".report.json.tmp-" + std::to_string(::getpid()) + "-0").c_str(), F_OK), -1);
}

TEST_F(OutputFileTest, AFileThatDoesNotExistYetIsCreatedAtTheEnd) {
  OutputFile out = OutputFile::check("--stats", path("new.json"), {});
  out.open();
  EXPECT_EQ(::access(path("new.json").c_str(), F_OK), -1);
  std::string why;
  ASSERT_TRUE(out.write("{}\n", why)) << why;
  EXPECT_EQ(read(path("new.json")), "{}\n");
}

TEST_F(OutputFileTest, AFifoWithoutAReaderIsRefusedWhenOpenedAndOneWithAReaderIsWritten) {
  const std::string fifo = path("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  OutputFile lonely = OutputFile::check("--stats", fifo, {});
  EXPECT_EQ(lonely.kind(), OutputFile::Kind::kDirect);
  EXPECT_THROW(lonely.open(), VmmError);

  const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(reader, 0);
  OutputFile out = OutputFile::check("--stats", fifo, {});
  out.open();
  std::string why;
  ASSERT_TRUE(out.write("through the fifo", why)) << why;
  char buf[64] = {};
  EXPECT_EQ(::read(reader, buf, sizeof buf), 16);
  EXPECT_STREQ(buf, "through the fifo");
  ::close(reader);
}

TEST_F(OutputFileTest, AFailedWriteIsSaid) {
  OutputFile out = OutputFile::check("--stats", "/dev/full", {});
  EXPECT_EQ(out.kind(), OutputFile::Kind::kDirect);
  out.open();
  std::string why;
  EXPECT_FALSE(out.write("x", why));
  EXPECT_NE(why.find("No space"), std::string::npos) << why;
}

TEST_F(OutputFileTest, AFifoWhoseReaderStopsReadingIsGivenUpOnNotWaitedForForever) {
  const std::string fifo = path("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);  // never reads
  ASSERT_GE(reader, 0);
  OutputFile out = OutputFile::check("--stats", fifo, {});
  out.set_write_timeout(std::chrono::milliseconds(20));
  out.open();
  std::string why;
  EXPECT_FALSE(out.write(std::string(1 << 20, 'x'), why));  // more than a pipe holds
  EXPECT_NE(why.find("took nothing"), std::string::npos) << why;
  ::close(reader);
}

// Only the names of a descriptor (/dev/stdout, /dev/fd/N, /proc/self/fd/N, /proc/PID/fd/N) are
// written in place: any path under /dev/ once was, so a report in /dev/shm was appended to the
// old one (two XML documents in one file) instead of replacing it.
TEST_F(OutputFileTest, ARegularFileUnderDevIsReplacedNotAppendedTo) {
  const std::string shm = "/dev/shm/minivmm-output-file-" + std::to_string(::getpid());
  if (::access("/dev/shm", W_OK) != 0) GTEST_SKIP() << "no writable /dev/shm";
  std::ofstream(shm) << "old report";
  OutputFile out = OutputFile::check("--junit", shm, {});
  EXPECT_EQ(out.kind(), OutputFile::Kind::kRegular);
  out.open();
  std::string why;
  EXPECT_TRUE(out.write("new", why)) << why;
  EXPECT_EQ(read(shm), "new");
  ::unlink(shm.c_str());
  EXPECT_EQ(OutputFile::check("--stats", "/dev/stdout", {}).kind(), OutputFile::Kind::kDirect);
  EXPECT_EQ(OutputFile::check("--stats", "/proc/self/fd/1", {}).kind(), OutputFile::Kind::kDirect);
}

// open_streamed_log(): a regular file or nothing; every other kind refused without an open
// that could wait (a FIFO) or follow (a symbolic link).
TEST_F(OutputFileTest, AStreamedLogIsARegularFileOrNothing) {
  std::string why;
  const int fresh = open_streamed_log(path("new.log"), why);
  EXPECT_GE(fresh, 0) << why;
  EXPECT_EQ(::write(fresh, "x", 1), 1);
  ::close(fresh);
  const int again = open_streamed_log(path("new.log"), why);  // truncated
  EXPECT_GE(again, 0) << why;
  ::close(again);
  EXPECT_EQ(read(path("new.log")), "");

  ASSERT_EQ(::mkfifo(path("fifo.log").c_str(), 0600), 0);
  ASSERT_EQ(::mkdir(path("dir.log").c_str(), 0755), 0);
  const std::string precious = make("precious", "keep");
  ASSERT_EQ(::symlink(precious.c_str(), path("link.log").c_str()), 0);
  const bool chr = ::mknod(path("null.log").c_str(), S_IFCHR | 0666, makedev(1, 3)) == 0;
  struct Case {
    std::string name;
    const char* why;
  };
  std::vector<Case> cases{{"fifo.log", "is a FIFO"}, {"dir.log", "is a directory"},
                          {"link.log", "is a symbolic link"}};
  if (chr) cases.push_back({"null.log", "is a character device"});
  for (const Case& c : cases) {
    why.clear();
    EXPECT_EQ(open_streamed_log(path(c.name), why), -1) << c.name;
    EXPECT_NE(why.find(c.why), std::string::npos) << why;
    EXPECT_NE(why.find(path(c.name)), std::string::npos) << why;
  }
  EXPECT_EQ(read(precious), "keep");
  EXPECT_EQ(open_streamed_log(path("no-such-dir/x.log"), why), -1);
}

}  // namespace
}  // namespace minivmm::vmm
