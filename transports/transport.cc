#include "transports/transport.h"

#include <algorithm>

#include "kernels/reduce.h"
#include "ringlet/error.h"

namespace ringlet::transport {

void Link::fillSendBuffer(std::byte* buffer, const std::byte* src, size_t bytes) {
  kernels::copy(buffer, src, bytes);
}

Bytes getWatching(Store& store, const std::string& key, Deadline deadline,
                  std::chrono::milliseconds slice, const std::function<void()>& betweenSlices,
                  const std::function<std::string()>& onTimeout) {
  for (;;) {
    const auto left =
        std::max(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()),
                 std::chrono::milliseconds(1));
    const bool last = !betweenSlices || left <= slice;
    try {
      return store.get(key, last ? left : slice);
    } catch (const TimeoutError&) {
      if (last) {
        if (!onTimeout) throw;
        throw TimeoutError(onTimeout());
      }
    }
    betweenSlices();
  }
}

}  // namespace ringlet::transport
