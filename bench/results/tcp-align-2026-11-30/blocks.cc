// 8-byte broadcasts from rank 0 in blocks of 2000; prints each block's time (us/call) on the
// receiving rank (which sees stalls) and the root, plus the slowest single call per block.
#include <ringlet/bootstrap.h>
#include <ringlet/communicator.h>
#include <sys/resource.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>
using namespace ringlet;
using Clk = std::chrono::steady_clock;
int main(int argc, char** argv) {
  auto comm = Communicator::create(Bootstrap::fromEnvironment());
  std::string op = argc > 1 ? argv[1] : "broadcast";
  int blocks = argc > 2 ? atoi(argv[2]) : 100;
  float x[2] = {1, 2}, y[4];
  auto call = [&] {
    if (op == "broadcast")
      comm.broadcast(x, 2, DataType::kFloat32, 0);
    else if (op == "scatter")
      comm.scatter(y, x, 1, DataType::kFloat32, 0);
    else
      comm.reduce(x, y, 2, DataType::kFloat32, ReduceOp::kSum, 0);
  };
  for (int i = 0; i < 2000; ++i) call();
  comm.barrier();
  std::vector<double> per(blocks), worst(blocks);
  std::vector<std::pair<double, double>> stalls;
  rusage r0{};
  getrusage(RUSAGE_SELF, &r0);
  auto t0 = Clk::now();
  for (int b = 0; b < blocks; ++b) {
    auto tb = Clk::now();
    double w = 0;
    for (int i = 0; i < 2000; ++i) {
      auto tc = Clk::now();
      call();
      auto te = Clk::now();
      double d = std::chrono::duration<double, std::micro>(te - tc).count();
      w = std::max(w, d);
      if (d > 3000)
        stalls.push_back({std::chrono::duration<double>(tc.time_since_epoch()).count(), d});
    }
    per[b] = std::chrono::duration<double, std::micro>(Clk::now() - tb).count() / 2000;
    worst[b] = w;
  }
  comm.barrier();
  double total = std::chrono::duration<double, std::micro>(Clk::now() - t0).count();
  std::string s;
  for (int b = 0; b < blocks; ++b)
    if (worst[b] > 5000)
      s += " [" + std::to_string(b) + ":" + std::to_string((int)worst[b]) + "us]";
  for (auto& [t, d] : stalls) std::printf("rank %d stall at %.6f for %.0f us\n", comm.rank(), t, d);
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  std::printf("rank %d cpu %.2f us/call vcsw %.3f ivcsw %.3f /call\n", comm.rank(),
              ((ru.ru_utime.tv_sec - r0.ru_utime.tv_sec) * 1e6 + ru.ru_utime.tv_usec -
               r0.ru_utime.tv_usec + (ru.ru_stime.tv_sec - r0.ru_stime.tv_sec) * 1e6 +
               ru.ru_stime.tv_usec - r0.ru_stime.tv_usec) /
                  (blocks * 2000.0),
              (ru.ru_nvcsw - r0.ru_nvcsw) / (blocks * 2000.0),
              (ru.ru_nivcsw - r0.ru_nivcsw) / (blocks * 2000.0));
  std::printf("rank %d: %s %.2f us/call overall; blocks with a call > 5 ms:%s\n", comm.rank(),
              op.c_str(), total / (blocks * 2000.0), s.c_str());
}
