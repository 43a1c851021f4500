#include "src/spawn/spawn_common.h"

#include <unistd.h>

#include <fmt/format.h>

#include <atomic>

namespace ringlet::spawn_detail {

void checkArguments(int n, const RankFunction& fn, const char* call) {
  if (n < 1 || n > kMaxRanks) {
    throw InvalidArgument(
        fmt::format("{}: the number of ranks must be 1 to {}, got {}", call, kMaxRanks, n));
  }
  if (!fn) throw InvalidArgument(fmt::format("{}: the rank function is empty", call));
}

std::string newJobId(const char* kind) {
  static std::atomic<int> next{0};
  return fmt::format("{}-{}-{}", kind, ::getpid(), next++);
}

std::optional<Failure> rootFailure(const std::vector<Failure>& failures) {
  if (failures.empty()) return std::nullopt;
  const Failure* root = &failures.front();
  for (size_t hops = 0; hops < failures.size(); ++hops) {
    if (root->blames < 0 || root->blames == root->rank) break;
    const Failure* blamed = nullptr;
    for (const Failure& f : failures) {
      if (f.rank == root->blames) blamed = &f;
    }
    if (blamed == nullptr) break;
    root = blamed;
  }
  return *root;
}

void throwFailure(const Failure& failure, int n, const char* call) {
  std::string text =
      fmt::format("{}: rank {} of {} failed ({})", call, failure.rank, n, failure.how);
  if (!failure.message.empty()) text += ": " + failure.message;
  throw SpawnError(failure.rank, failure.how, text);
}

}  // namespace ringlet::spawn_detail
