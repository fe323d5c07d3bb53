// The guest-visible options of `minivmm run`, one row each (issue 34): everything about an
// option that the command line, the Config and the snapshot's configuration record need, so a
// new one is one row here. run_cli.h registers each row with CLI11 (its name, help, default
// and accepted values), run_config.cc parses the row's text into the Config with the row's own
// parser, and snapshot_config.cc writes and reads the row's field in the record, judges a
// restore's command line with it and copies the snapshot's value back. --drive, --net and
// --share have rules of their own (specs, sizes, renames, MACs) and are not rows.
//
// No CLI11 here: the rows are plain data and functions, so machine/ stays free of the command
// line's library and the unit tests read the table directly.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "devices/bus/device_state.h"
#include "vmm/machine/config.h"

namespace minivmm::vmm {

// A row's text as the command line gave it (or its default): one value, a list, or a flag.
struct GuestText {
  std::string value;
  std::vector<std::string> list;
  bool flag = false;
};

struct GuestOption {
  enum class Kind { kValue, kList, kFlag };

  const char* name;  // "--pit-tick", as the command line and every message name it
  std::string help;
  Kind kind = Kind::kValue;
  // kValue: the text the CLI starts from. It parses to Config{}'s field (a unit test checks),
  // so the default is said once, in config.h, and this text only spells it.
  const char* default_text = "";
  // kValue: the texts the CLI accepts (empty: any, the parser judges). For an enum, in the
  // enum's order: the record holds the index, and a contradiction names the text.
  std::vector<std::string_view> choices;

  // The text into the Config; the usage line when the text is not one ("--memory: ...").
  std::optional<std::string> (*parse)(const GuestOption& row, const GuestText& text, Config& c);
  // The field in the record (in row order: the record's layout is this table's order), and
  // back, checked: a value this build cannot run is devices::StateError.
  void (*save)(const GuestOption& row, devices::StateWriter& out, const Config& c);
  void (*load)(const GuestOption& row, devices::StateReader& in, Config& c);
  // Whether a restore's command line says what the snapshot says; how the snapshot's guest
  // has it (for the contradiction's line); the snapshot's value into the command line's Config.
  bool (*same)(const Config& user, const Config& saved);
  std::string (*snapshot_has)(const GuestOption& row, const Config& saved);
  void (*take)(Config& user, const Config& saved);
  // The first record layout with the field: an older record leaves it at its default (without
  // it, a row appended for a new option made every older snapshot unreadable: found by the
  // scratch virtio-rng of the recipe check). A new row goes at the end with a new layout.
  std::uint8_t since = 1;
};

// Every row, in the record's order.
const std::vector<GuestOption>& guest_options();

}  // namespace minivmm::vmm
