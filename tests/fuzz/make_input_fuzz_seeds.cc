// Writes the seed corpora of the input fuzzers (kernel loaders, control socket, size parser):
// valid images built by the loader tests' builders, in the fuzzers' input format (byte 0: cmdline
// length / 4, byte 1: initrd size in 4 KiB units, then the image; kernel_loader_fuzz.h), plus a
// few damaged ones, requests in the control socket's protocol, and sizes as users write them.
//
//   make_input_fuzz_seeds <dir>     writes <dir>/<target>/<seed>; run it on tests/fuzz/corpus
//
// Deterministic; regenerate and commit when an input format or a builder changes.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "tests/unit/vmm/boot/bzimage_builder.h"
#include "tests/unit/vmm/boot/elf_builder.h"

namespace {

namespace t = minivmm::vmm::testing;

class Corpus {
 public:
  explicit Corpus(std::filesystem::path root) : root_(std::move(root)) {}
  void add(const std::string& target, const std::string& name, const std::vector<std::byte>& b) {
    const auto dir = root_ / target;
    std::filesystem::create_directories(dir);
    std::ofstream out(dir / name, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
    ++count_;
  }
  void add_text(const std::string& target, const std::string& name, const std::string& text) {
    std::vector<std::byte> b;
    for (char c : text) b.push_back(static_cast<std::byte>(c));
    add(target, name, b);
  }
  // The image with the loader fuzzers' two option bytes in front.
  void add_image(const std::string& target, const std::string& name,
                 const std::vector<std::byte>& image) {
    for (const auto& [cmdline4, initrd4k, suffix] :
         std::vector<std::tuple<int, int, std::string>>{{0, 0, ""}, {8, 3, "-cmdline-initrd"}}) {
      std::vector<std::byte> b{static_cast<std::byte>(cmdline4), static_cast<std::byte>(initrd4k)};
      b.insert(b.end(), image.begin(), image.end());
      add(target, name + suffix, b);
    }
  }
  int count() const { return count_; }

 private:
  std::filesystem::path root_;
  int count_ = 0;
};

std::vector<std::byte> pvh_image(bool with_note = true) {
  t::ElfSpec spec;
  spec.entry = 0xffffffff81000000;
  spec.segments = {{1, 0x1000000, t::pattern_bytes(0x800, 3), 0, 0x200000},
                   {1, 0x1200000, t::pattern_bytes(0x200, 5), 0x1000, 0x200000}};
  if (with_note) {
    spec.segments.push_back(
        {4, 0, t::make_note("Xen", 18, t::le_bytes<std::uint32_t>(0x1000040)), 0, 4});
  }
  return t::make_elf(spec);
}

std::vector<std::byte> multiboot_image(std::uint32_t flags) {
  auto text = t::pattern_bytes(0x400, 9);
  t::put<std::uint32_t>(text, 0, 0x1badb002);
  t::put<std::uint32_t>(text, 4, flags);
  t::put<std::uint32_t>(text, 8, 0u - 0x1badb002u - flags);
  t::ElfSpec spec;
  spec.is64 = false;
  spec.machine = 3;
  spec.entry = 0x400020;
  spec.segments = {{1, 0x400000, text, 0, 0x1000},
                   {1, 0x410000, t::pattern_bytes(0x40, 4), 0x2000, 0x1000}};
  return t::make_elf(spec);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <corpus dir>\n", argv[0]);
    return 2;
  }
  Corpus c(argv[1]);

  t::BzImageSpec small;
  small.payload_size = 0x400;
  c.add_image("bzimage_loader_fuzz", "protocol-2.15", t::make_bzimage(small));
  t::BzImageSpec old = small;
  old.version = 0x020a;
  old.header_len_byte = 0x62;
  old.xloadflags = 0;
  c.add_image("bzimage_loader_fuzz", "protocol-2.10", t::make_bzimage(old));
  t::BzImageSpec fixed = small;
  fixed.relocatable = 0;
  c.add_image("bzimage_loader_fuzz", "not-relocatable", t::make_bzimage(fixed));
  t::BzImageSpec sects0 = small;
  sects0.setup_sects = 0;
  c.add_image("bzimage_loader_fuzz", "setup-sects-0", t::make_bzimage(sects0));

  c.add_image("pvh_loader_fuzz", "vmlinux", pvh_image());
  c.add_image("pvh_loader_fuzz", "no-note", pvh_image(false));

  c.add_image("multiboot_loader_fuzz", "flags-3", multiboot_image(0x3));
  c.add_image("multiboot_loader_fuzz", "flags-0", multiboot_image(0x0));
  c.add_image("multiboot_loader_fuzz", "flags-video", multiboot_image(0x4));

  const std::string reqs[] = {
      "{\"cmd\":\"stats\"}\n",
      "{\"cmd\":\"pause\",\"id\":1}\n{\"cmd\":\"resume\",\"id\":\"x\"}\n",
      "{\"cmd\":\"quit\"}\r\n",
      "\n  \n{\"cmd\":\"nope\"}\n[1,2]\n\"s\"\n{\"cmd\":7}\n",
      "{\"cmd\":\"stats\",\"id\":{\"a\":[null,true,1.5e3]}}\n{\"cmd\":\"st",
      "not json\n{\"cmd\":\"\\u00e9\\ud83d\\ude00\"}\n",
  };
  int i = 0;
  for (const std::string& r : reqs)
    c.add_text("control_socket_fuzz", "req-" + std::to_string(i++), r);
  // Issue 20's attack lines, each followed by a request that must still be served: numbers no
  // double holds (out_of_range from the parser, which ended the VMM), numbers at the edges,
  // nesting deep enough to overflow the stack when copied or dumped, and bytes JSON forbids.
  const std::string digits(400, '9');
  const std::string ok = "{\"cmd\":\"stats\",\"id\":\"after\"}\n";
  const std::vector<std::pair<std::string, std::string>> attacks = {
      {"overflow-1e309", "[1e309]\n"},
      {"overflow-neg-1e309", "-1e309\n{\"cmd\":-1e309}\n"},
      {"overflow-cmd-1e400", "{\"cmd\":1e400}\n"},
      {"overflow-400-digits", digits + "\n-" + digits + "\n"},
      {"overflow-id", "{\"cmd\":\"stats\",\"id\":" + digits + "}\n"},
      {"underflow-1e-400", "{\"cmd\":\"stats\",\"id\":1e-400}\n{\"cmd\":\"stats\",\"id\":-0}\n"},
      {"int-limits",
       "{\"cmd\":\"stats\",\"id\":18446744073709551616}\n"
       "{\"cmd\":\"stats\",\"id\":-9223372036854775809}\n"},
      {"bad-numbers", "{\"cmd\":\"stats\",\"id\":0x10}\n{\"cmd\":\"stats\",\"id\":01}\n"},
      {"deep-id", "{\"cmd\":\"stats\",\"id\":" + std::string(2000, '[') +
                      std::string(2000, ']') + "}\n"},
      {"deep-unclosed", std::string(4096, '[') + "\n"},
      {"deep-objects", std::string(100, '{') + "\n"},
      {"nul-bytes", std::string("{\"cmd\":\"stats\"}") + '\0' + "junk\n" + '\0' + '\0' + "\n"},
      {"crlf", "{\"cmd\":\"pause\"}\r\r\n\r\n\r{\"cmd\":\"resume\"}\r\n"},
      {"invalid-utf8", "{\"cmd\":\"\xff\xfe\"}\n{\"cmd\":\"stats\",\"id\":\"\xc3\"}\n\xed\xa0\x80\n"},
      {"huge-id", "{\"cmd\":\"stats\",\"id\":\"" + std::string(4000, 'i') + "\"}\n"},
  };
  for (const auto& [name, text] : attacks) c.add_text("control_socket_fuzz", name, text + ok);

  for (const char* s :
       {"64M", "1G", "512MiB", "65536", "4k", "3gb", "10B", "18446744073709551615"}) {
    c.add_text("size_parser_fuzz", s, s);
  }
  std::printf("wrote %d seeds under %s\n", c.count(), argv[1]);
  return 0;
}
