// Ping-pong of sender-only calls: broadcasts alternating roots, reduce to alternating roots,
// and a run of broadcasts then one reply (latency of the last of a run).
#include <ringlet/bootstrap.h>
#include <ringlet/communicator.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>
using namespace ringlet;
using Clk = std::chrono::steady_clock;
int main() {
  auto comm = Communicator::create(Bootstrap::fromEnvironment());
  float x[2] = {1, 2};
  auto time = [&](const char* name, int iters, auto&& body) {
    for (int i = 0; i < iters / 10; ++i) body(i);
    comm.barrier();
    std::vector<double> us;
    auto t0 = Clk::now();
    for (int i = 0; i < iters; ++i) body(i);
    double total = std::chrono::duration<double, std::micro>(Clk::now() - t0).count();
    if (comm.rank() == 0) std::printf("%-40s %8.2f us/iter\n", name, total / iters);
  };
  time("broadcast alternating roots", 20000,
       [&](int i) { comm.broadcast(x, 2, DataType::kFloat32, i % 2); });
  time("reduce alternating roots", 20000,
       [&](int i) { comm.reduce(x, x, 2, DataType::kFloat32, ReduceOp::kSum, i % 2); });
  time("8 broadcasts root 0, 1 from root 1", 4000, [&](int) {
    for (int k = 0; k < 8; ++k) comm.broadcast(x, 2, DataType::kFloat32, 0);
    comm.broadcast(x, 2, DataType::kFloat32, 1);
  });
  time("broadcast root 0 then allreduce", 10000, [&](int) {
    comm.broadcast(x, 2, DataType::kFloat32, 0);
    comm.allreduce(x, x, 2, DataType::kFloat32, ReduceOp::kSum);
  });
}
