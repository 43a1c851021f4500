#pragma once
// Helpers shared by the store implementations: argument checks against the store.h limits,
// timeout resolution and the TimeoutError every get() throws.

#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "ringlet/store.h"

namespace ringlet::store {

using Clock = std::chrono::steady_clock;

// Throws InvalidArgument naming `where` when the key is empty or longer than kMaxKeyBytes.
void checkKey(std::string_view key, std::string_view where);
// Throws InvalidArgument naming `where` when the value is longer than kMaxValueBytes.
void checkValue(size_t bytes, std::string_view where);

// timeout < 0 means the store default.
std::chrono::milliseconds effectiveTimeout(std::chrono::milliseconds timeout,
                                           std::chrono::milliseconds storeDefault);

// "timed out after 300 ms waiting for key 'x' in file store /tmp/s"
[[noreturn]] void throwGetTimeout(std::string_view key, std::string_view store,
                                  std::chrono::milliseconds waited);

// The decimal text stored by add(). Throws InvalidArgument when an existing value is not a
// decimal integer (the key was set() to something else).
int64_t parseCounter(std::span<const std::byte> value, std::string_view key,
                     std::string_view store);
Bytes counterBytes(int64_t value);
// current + delta, or InvalidArgument naming the key, the store and both numbers when the sum
// does not fit in 64 bits.
int64_t addCounter(int64_t current, int64_t delta, std::string_view key, std::string_view store);
// The message of that InvalidArgument (the TCP store server sends it to its client).
std::string overflowText(std::string_view key, std::string_view store, int64_t current,
                         int64_t delta);

// A printable rendering of a key for messages (binary bytes escaped, long keys shortened).
std::string printableKey(std::string_view key);

}  // namespace ringlet::store
