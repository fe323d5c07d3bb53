#include "vmm/testrun/schedule.h"

#include <algorithm>
#include <cstdlib>

namespace minivmm::testrun {

std::map<std::string, double> previous_durations(std::string_view tsv) {
  std::map<std::string, double> out;
  bool header = true;
  while (!tsv.empty()) {
    const auto nl = tsv.find('\n');
    const std::string line(tsv.substr(0, nl));
    tsv = nl == std::string_view::npos ? std::string_view() : tsv.substr(nl + 1);
    if (header) {  // name, verdict, detail, duration_s, ...
      header = false;
      continue;
    }
    std::vector<std::string> f;
    std::size_t start = 0;
    while (true) {
      const auto tab = line.find('\t', start);
      f.push_back(line.substr(start, tab - start));
      if (tab == std::string::npos) break;
      start = tab + 1;
    }
    if (f.size() < 4 || f[0].empty()) continue;
    char* end = nullptr;
    const double d = std::strtod(f[3].c_str(), &end);
    if (end == f[3].c_str() || *end != '\0' || !(d >= 0)) continue;
    out[f[0]] = d;
  }
  return out;
}

std::vector<std::size_t> start_order(const std::vector<TestCase>& tests,
                                     const std::map<std::string, double>& previous) {
  std::vector<std::size_t> order(tests.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  auto known = [&](std::size_t i) { return previous.find(tests[i].name); };
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    const auto ka = known(a), kb = known(b);
    const bool has_a = ka != previous.end(), has_b = kb != previous.end();
    if (has_a != has_b) return !has_a;  // the unknown first
    if (!has_a) return false;           // both unknown: their own order (stable)
    return ka->second > kb->second;
  });
  return order;
}

}  // namespace minivmm::testrun
