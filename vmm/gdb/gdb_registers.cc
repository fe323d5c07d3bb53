#include "vmm/gdb/gdb_registers.h"

#include <cstring>
#include <stdexcept>
#include <vector>

namespace minivmm::vmm::gdb {
namespace {

struct Table {
  std::vector<RegisterInfo> regs;
  std::size_t bytes = 0;
  Table() {
    auto add = [this](const char* name, int bits, const char* type, const char* group) {
      regs.push_back({name, bits, type, group, bytes});
      bytes += static_cast<std::size_t>(bits / 8);
    };
    static const char* const kGpr[] = {"rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rbp", "rsp",
                                       "r8",  "r9",  "r10", "r11", "r12", "r13", "r14", "r15"};
    for (const char* n : kGpr) {
      const bool ptr = std::strcmp(n, "rbp") == 0 || std::strcmp(n, "rsp") == 0;
      add(n, 64, ptr ? "data_ptr" : "int64", nullptr);
    }
    add("rip", 64, "code_ptr", nullptr);
    add("eflags", 32, "i386_eflags", nullptr);
    for (const char* n : {"cs", "ss", "ds", "es", "fs", "gs"}) add(n, 32, "int32", nullptr);
    static const char* const kSt[] = {"st0", "st1", "st2", "st3", "st4", "st5", "st6", "st7"};
    for (const char* n : kSt) add(n, 80, "i387_ext", nullptr);
    for (const char* n : {"fctrl", "fstat", "ftag", "fiseg", "fioff", "foseg", "fooff", "fop"}) {
      add(n, 32, "int", "float");
    }
    static const char* const kXmm[] = {"xmm0", "xmm1", "xmm2",  "xmm3",  "xmm4",  "xmm5",
                                       "xmm6", "xmm7", "xmm8",  "xmm9",  "xmm10", "xmm11",
                                       "xmm12", "xmm13", "xmm14", "xmm15"};
    for (const char* n : kXmm) add(n, 128, "vec128", nullptr);
    add("mxcsr", 32, "i386_mxcsr", "vector");
    add("fs_base", 64, "int", nullptr);
    add("gs_base", 64, "int", nullptr);
    for (const char* n : {"cr0", "cr2", "cr3", "cr4", "cr8", "efer"}) add(n, 64, "int", "system");
    if (regs.size() != static_cast<std::size_t>(reg::kCount) ||
        bytes > sizeof(RegisterFile::bytes)) {
      throw std::logic_error("gdb register table out of step");
    }
  }
};

const Table& table() {
  static const Table t;
  return t;
}

// gdb's own amd64 feature types (its features/i386/64bit-core.xml and 64bit-sse.xml name them;
// a description must define the ones it uses that gdb does not predefine).
constexpr const char* kTypes = R"(  <flags id="i386_eflags" size="4">
    <field name="CF" start="0" end="0"/><field name="" start="1" end="1"/>
    <field name="PF" start="2" end="2"/><field name="AF" start="4" end="4"/>
    <field name="ZF" start="6" end="6"/><field name="SF" start="7" end="7"/>
    <field name="TF" start="8" end="8"/><field name="IF" start="9" end="9"/>
    <field name="DF" start="10" end="10"/><field name="OF" start="11" end="11"/>
    <field name="NT" start="14" end="14"/><field name="RF" start="16" end="16"/>
    <field name="VM" start="17" end="17"/><field name="AC" start="18" end="18"/>
    <field name="VIF" start="19" end="19"/><field name="VIP" start="20" end="20"/>
    <field name="ID" start="21" end="21"/>
  </flags>
)";
constexpr const char* kSseTypes = R"(  <vector id="v8bf16" type="bfloat16" count="8"/>
  <vector id="v4f" type="ieee_single" count="4"/>
  <vector id="v2d" type="ieee_double" count="2"/>
  <vector id="v16i8" type="int8" count="16"/>
  <vector id="v8i16" type="int16" count="8"/>
  <vector id="v4i32" type="int32" count="4"/>
  <vector id="v2i64" type="int64" count="2"/>
  <union id="vec128">
    <field name="v8_bfloat16" type="v8bf16"/><field name="v4_float" type="v4f"/>
    <field name="v2_double" type="v2d"/><field name="v16_int8" type="v16i8"/>
    <field name="v8_int16" type="v8i16"/><field name="v4_int32" type="v4i32"/>
    <field name="v2_int64" type="v2i64"/><field name="uint128" type="uint128"/>
  </union>
  <flags id="i386_mxcsr" size="4">
    <field name="IE" start="0" end="0"/><field name="DE" start="1" end="1"/>
    <field name="ZE" start="2" end="2"/><field name="OE" start="3" end="3"/>
    <field name="UE" start="4" end="4"/><field name="PE" start="5" end="5"/>
    <field name="DAZ" start="6" end="6"/><field name="IM" start="7" end="7"/>
    <field name="DM" start="8" end="8"/><field name="ZM" start="9" end="9"/>
    <field name="OM" start="10" end="10"/><field name="UM" start="11" end="11"/>
    <field name="PM" start="12" end="12"/><field name="FZ" start="15" end="15"/>
  </flags>
)";

std::string build_xml() {
  const auto& t = table();
  std::string x =
      "<?xml version=\"1.0\"?>\n<!DOCTYPE target SYSTEM \"gdb-target.dtd\">\n<target>\n"
      "  <architecture>i386:x86-64</architecture>\n";
  auto reg_line = [&](int i) {
    const RegisterInfo& r = t.regs[static_cast<std::size_t>(i)];
    x += "    <reg name=\"" + std::string(r.name) + "\" bitsize=\"" + std::to_string(r.bits) +
         "\" type=\"" + r.type + "\" regnum=\"" + std::to_string(i) + "\"";
    if (r.group) x += std::string(" group=\"") + r.group + "\"";
    x += "/>\n";
  };
  auto feature = [&](const char* name, const char* types, int from, int to) {
    x += std::string("  <feature name=\"") + name + "\">\n";
    if (types) x += types;
    for (int i = from; i < to; ++i) reg_line(i);
    x += "  </feature>\n";
  };
  feature("org.gnu.gdb.i386.core", kTypes, 0, reg::kXmm0);
  feature("org.gnu.gdb.i386.sse", kSseTypes, reg::kXmm0, reg::kMxcsr + 1);
  feature("org.gnu.gdb.i386.segments", nullptr, reg::kFsBase, reg::kGsBase + 1);
  feature("org.minivmm.x86.system", nullptr, reg::kCr0, reg::kCount);
  x += "</target>\n";
  return x;
}

}  // namespace

std::span<const RegisterInfo> registers() { return table().regs; }
std::size_t register_file_bytes() { return table().bytes; }

std::span<std::uint8_t> RegisterFile::raw(int r) {
  const RegisterInfo& i = table().regs.at(static_cast<std::size_t>(r));
  return {bytes.data() + i.offset, static_cast<std::size_t>(i.bits / 8)};
}
std::span<const std::uint8_t> RegisterFile::raw(int r) const {
  const RegisterInfo& i = table().regs.at(static_cast<std::size_t>(r));
  return {bytes.data() + i.offset, static_cast<std::size_t>(i.bits / 8)};
}

std::uint64_t RegisterFile::get(int r) const {
  const auto b = raw(r);
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < b.size() && i < 8; ++i) v |= std::uint64_t{b[i]} << (8 * i);
  return v;
}

void RegisterFile::set(int r, std::uint64_t v) {
  auto b = raw(r);
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = i < 8 ? static_cast<std::uint8_t>(v >> (8 * i)) : 0;
}

const std::string& target_xml() {
  static const std::string x = build_xml();
  return x;
}

}  // namespace minivmm::vmm::gdb
