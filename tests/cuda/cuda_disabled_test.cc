// A build without CUDA still links the device API and refuses it with a reason.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ringlet/communicator.h"
#include "ringlet/cuda.h"
#include "ringlet/error.h"

namespace ringlet {
namespace {

TEST(CudaDisabled, SaysWhy) {
  EXPECT_FALSE(cuda::builtWithCuda());
  std::string reason;
  EXPECT_EQ(cuda::deviceCount(&reason), 0);
  EXPECT_NE(reason.find("without CUDA"), std::string::npos) << reason;
  std::vector<float> host(4);
  EXPECT_THROW(cuda::checkDevicePointer(host.data(), 0, "send"), InvalidArgument);
  CommunicatorOptions options;
  options.transport = "local";
  Communicator comm =
      Communicator::create(Bootstrap::forThread(0, 1, makeInProcessStore()), options);
  EXPECT_THROW(cuda::DeviceCommunicator(comm, 0), CudaError);
}

}  // namespace
}  // namespace ringlet
