#pragma once
// What spawn() and spawnThreads() share: argument checks, job ids, and the record of the first
// rank that failed.
#include <optional>
#include <string>
#include <vector>

#include "ringlet/spawn.h"

namespace ringlet::spawn_detail {

inline constexpr int kMaxRanks = 1024;

// Throws InvalidArgument unless 1 <= n <= kMaxRanks and fn is callable.
void checkArguments(int n, const RankFunction& fn, const char* call);

// "spawn-<pid>-<k>": unique within this process, only [A-Za-z0-9-].
std::string newJobId(const char* kind);

struct Failure {
  int rank = -1;
  std::string how;      // "exit status 1", "signal 9 (Killed)", "exception"
  std::string message;  // what the rank said, if anything
  int blames = -1;      // the rank a PeerError named as the cause, or -1
};

// Of the failures in the order they were seen, the first one, unless its error blames another
// rank that failed too (a PeerError: it only noticed the other's death), followed as far as the
// blame goes. nullopt when `failures` is empty.
std::optional<Failure> rootFailure(const std::vector<Failure>& failures);

// The SpawnError for `failure` of a job of `n` ranks started by `call`.
[[noreturn]] void throwFailure(const Failure& failure, int n, const char* call);

}  // namespace ringlet::spawn_detail
