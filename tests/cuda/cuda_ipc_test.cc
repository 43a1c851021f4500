// CUDA IPC handles through the store: two processes on GPU 0; rank 0 writes a buffer on its
// stream and records an interprocess event; rank 1 opens both, makes its stream wait on the
// event, and reads rank 0's memory.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <vector>

#include "ringlet/error.h"
#include "tests/cuda/gpu_probe.h"
#include "tests/support/ranks.h"
#include "transports/cuda/ipc_handles.h"

namespace ringlet {
namespace {

using namespace std::chrono_literals;
using transport::cuda::InterprocessEvent;
using transport::cuda::PeerEvent;
using transport::cuda::PeerMemory;

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw CudaError(std::string(what) + ": " + cudaGetErrorString(e));
}

TEST(CudaIpc, MemoryAndEventCrossProcesses) {
  RINGLET_SKIP_WITHOUT_GPUS(1);
  testing::runProcessRanks(2, [](int rank, int, std::shared_ptr<Store> store) {
    constexpr size_t kCount = 1 << 20;
    check(cudaSetDevice(0), "cudaSetDevice");
    cudaStream_t stream = nullptr;
    check(cudaStreamCreate(&stream), "cudaStreamCreate");
    if (rank == 0) {
      std::vector<int32_t> data(kCount);
      for (size_t j = 0; j < kCount; ++j) data[j] = static_cast<int32_t>(j * 3 + 1);
      int32_t* buffer = nullptr;
      check(cudaMalloc(&buffer, kCount * sizeof(int32_t)), "cudaMalloc");
      InterprocessEvent written;
      transport::cuda::publishMemory(*store, "buffer", buffer, kCount * sizeof(int32_t), 0);
      written.publish(*store, "written");
      store->setString("published", "1");
      // Written after the handles went out: the reader must wait on the event, not the store.
      check(cudaMemcpyAsync(buffer, data.data(), kCount * sizeof(int32_t), cudaMemcpyHostToDevice,
                            stream),
            "cudaMemcpyAsync");
      check(cudaEventRecord(written.get(), stream), "cudaEventRecord");
      store->setString("recorded", "1");
      store->getString("done", 30s);  // keep memory and event alive until the reader is done
      check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
      cudaFree(buffer);
    } else {
      {  // the mapping and the event are closed before rank 0 may free them
        PeerMemory memory = PeerMemory::open(*store, "buffer", 30s);
        PeerEvent written = PeerEvent::open(*store, "written", 30s);
        EXPECT_EQ(memory.bytes(), kCount * sizeof(int32_t));
        EXPECT_EQ(memory.ownerDevice(), 0);
        store->getString("recorded", 30s);
        check(cudaStreamWaitEvent(stream, written.get(), 0), "cudaStreamWaitEvent");
        std::vector<int32_t> got(kCount);
        check(cudaMemcpyAsync(got.data(), memory.data(), kCount * sizeof(int32_t),
                              cudaMemcpyDeviceToHost, stream),
              "cudaMemcpyAsync");
        check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
        for (size_t j = 0; j < kCount; ++j) {
          if (got[j] != static_cast<int32_t>(j * 3 + 1)) {
            ADD_FAILURE() << "element " << j << ": " << got[j];
            break;
          }
        }
      }
      store->setString("done", "1");
    }
    cudaStreamDestroy(stream);
  });
}

}  // namespace
}  // namespace ringlet
