#include "src/bootstrap/slurm_hostlist.h"

#include <fmt/format.h>

#include <charconv>

#include "ringlet/error.h"

namespace ringlet::bootstrap {
namespace {

struct HostlistError {};

// The top-level items of "a[1-2],b,c[3,5]": commas inside brackets do not split.
std::vector<std::string> splitItems(const std::string& text) {
  std::vector<std::string> items;
  std::string item;
  int depth = 0;
  for (char c : text) {
    if (c == '[') ++depth;
    if (c == ']' && --depth < 0) throw HostlistError{};
    if (c == ',' && depth == 0) {
      items.push_back(item);
      item.clear();
    } else {
      item += c;
    }
  }
  if (depth != 0) throw HostlistError{};
  items.push_back(item);
  return items;
}

uint64_t parseNumber(const std::string& digits) {
  uint64_t value = 0;
  auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (digits.empty() || ec != std::errc() || ptr != digits.data() + digits.size()) {
    throw HostlistError{};
  }
  return value;
}

// "01-04,09" -> "01", "02", "03", "04", "09" (each padded to the width of its range's start).
std::vector<std::string> expandRanges(const std::string& ranges) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= ranges.size()) {
    size_t comma = ranges.find(',', pos);
    if (comma == std::string::npos) comma = ranges.size();
    const std::string range = ranges.substr(pos, comma - pos);
    pos = comma + 1;
    const size_t dash = range.find('-');
    const std::string first = range.substr(0, dash);
    const uint64_t lo = parseNumber(first);
    const uint64_t hi = dash == std::string::npos ? lo : parseNumber(range.substr(dash + 1));
    if (hi < lo || hi - lo >= kMaxSlurmHosts) throw HostlistError{};
    for (uint64_t n = lo; n <= hi; ++n) out.push_back(fmt::format("{:0{}}", n, first.size()));
  }
  return out;
}

void expandItem(const std::string& item, std::vector<std::string>& out) {
  const size_t open = item.find('[');
  if (open == std::string::npos) {
    if (item.empty() || item.find(']') != std::string::npos) throw HostlistError{};
    out.push_back(item);
    return;
  }
  const size_t close = item.find(']', open);
  if (close == std::string::npos) throw HostlistError{};
  const std::string prefix = item.substr(0, open);
  const std::string rest = item.substr(close + 1);
  for (const std::string& number : expandRanges(item.substr(open + 1, close - open - 1))) {
    expandItem(prefix + number + rest, out);
    if (out.size() > kMaxSlurmHosts) throw HostlistError{};
  }
}

}  // namespace

std::vector<std::string> expandSlurmHostlist(const std::string& text, const std::string& what) {
  std::vector<std::string> hosts;
  try {
    for (const std::string& item : splitItems(text)) expandItem(item, hosts);
  } catch (const HostlistError&) {
    throw InvalidArgument(
        fmt::format("{}='{}' is not a Slurm host list like 'node[01-04],gpu7' (at most {} hosts)",
                    what, text, kMaxSlurmHosts));
  }
  return hosts;
}

}  // namespace ringlet::bootstrap
