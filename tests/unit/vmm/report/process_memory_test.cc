#include "vmm/report/process_memory.h"

#include <gtest/gtest.h>

#include <sys/mman.h>

#include <cstring>

#include "vmm/kvm/guest_ram_mapping.h"

namespace minivmm::vmm {
namespace {

TEST(ProcessMemoryTest, ParsesRssAndPeakFromProcStatus) {
  const auto m = parse_proc_status_memory(
      "Name:\tminivmm\nVmPeak:\t  100 kB\nVmHWM:\t    4100 kB\nVmRSS:\t    3072 kB\n"
      "RssAnon:\t     436 kB\nRssFile:\t    2636 kB\nThreads:\t3\n");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->rss_bytes, 3072u * 1024);
  EXPECT_EQ(m->peak_rss_bytes, 4100u * 1024);
  EXPECT_EQ(m->anon_bytes, 436u * 1024);
  EXPECT_FALSE(m->pss_bytes);
}

TEST(ProcessMemoryTest, ParsesPssFromSmapsRollup) {
  const auto pss = parse_smaps_rollup_pss(
      "55b70e49d000-7ffdc7696000 ---p 00000000 00:00 0    [rollup]\nRss:    5676 kB\n"
      "Pss:    2009 kB\nPss_Dirty:   444 kB\n");
  ASSERT_TRUE(pss);
  EXPECT_EQ(*pss, 2009u * 1024);
  EXPECT_FALSE(parse_smaps_rollup_pss("Rss:    5676 kB\nPss_Anon:  436 kB\n"));
}

TEST(ProcessMemoryTest, RejectsMissingOrMalformedFields) {
  EXPECT_FALSE(parse_proc_status_memory(""));
  EXPECT_FALSE(parse_proc_status_memory("VmRSS:\t 12 kB\nRssAnon:\t 1 kB\n"));  // no VmHWM
  EXPECT_FALSE(parse_proc_status_memory("VmHWM:\t 12 kB\nVmRSS:\t 12 kB\n"));  // no RssAnon
  EXPECT_FALSE(parse_proc_status_memory("VmHWM:\t 12 kB\nVmRSS:\t x kB\n"));  // not a number
  EXPECT_FALSE(parse_proc_status_memory("VmHWM:\t 12 kB\nVmRSS:\t 12 MB\n"));  // unit
  EXPECT_FALSE(parse_proc_status_memory("VmHWM:\t 12 kB\nVmRSSX:\t 12 kB\n"));  // other key
  EXPECT_FALSE(
      parse_proc_status_memory("VmHWM:\t 12 kB\nVmRSS:\t 99999999999999999999 kB\n"));
}

TEST(ProcessMemoryTest, ReadsThisProcess) {
  const auto m = read_process_memory();
  ASSERT_TRUE(m);
  EXPECT_GT(m->rss_bytes, 0u);
  EXPECT_GE(m->peak_rss_bytes, m->rss_bytes);
  EXPECT_LE(m->anon_bytes, m->rss_bytes);
  ASSERT_TRUE(m->pss_bytes);
  EXPECT_GT(*m->pss_bytes, 0u);
  EXPECT_LE(*m->pss_bytes, m->rss_bytes);
}

TEST(GuestRamMappingTest, ResidentBytesCountsOnlyTouchedPages) {
  GuestRamMapping ram(64 * 4096);
  EXPECT_EQ(ram.resident_bytes(), 0u);  // MAP_NORESERVE: nothing backed until written
  auto bytes = ram.memory().bytes();
  std::memset(bytes.data(), 1, 4096);                // page 0
  std::memset(bytes.data() + 10 * 4096 + 7, 1, 1);  // one byte of page 10
  EXPECT_EQ(ram.resident_bytes(), 2u * 4096);
}

}  // namespace
}  // namespace minivmm::vmm
