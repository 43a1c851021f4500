// ringlet-bench without CUDA: --device cuda is refused with the reason.
#include "bench/device_side.h"

namespace ringlet::bench::device {
namespace {
constexpr const char* kNoCuda =
    "--device cuda: this ringlet-bench was built without CUDA (RINGLET_CUDA=OFF or no toolkit)";
}

bool compiledIn() { return false; }

struct DeviceSide::State {};
DeviceSide::DeviceSide(Communicator&, int, const Options&) { throw InvalidArgument(kNoCuda); }
DeviceSide::~DeviceSide() = default;
void* DeviceSide::send() { return nullptr; }
void* DeviceSide::recv() { return nullptr; }
void DeviceSide::upload(void*, const void*, size_t) {}
void DeviceSide::download(void*, const void*, size_t) {}
void DeviceSide::run(BenchOp, const CallArgs&) {}
void DeviceSide::synchronize() {}
double DeviceSide::timeDeviceCopy(size_t, int, int) { return 0; }
std::string DeviceSide::describe() const { return kNoCuda; }
std::string DeviceSide::algorithm(BenchOp, size_t,
                                  const std::function<std::string(size_t)>&) const {
  return kNoCuda;
}

}  // namespace ringlet::bench::device
