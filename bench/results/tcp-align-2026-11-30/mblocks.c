#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const char* op = argc > 1 ? argv[1] : "broadcast";
  int n = argc > 2 ? atoi(argv[2]) : 200000;
  float x[2] = {1, 2}, y[4];
  int stalls = 0;
  double stalled = 0, worst = 0;
  for (int pass = 0; pass < 2; ++pass) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < (pass ? n : n / 10); ++i) {
      double tc = MPI_Wtime();
      if (!strcmp(op, "broadcast"))
        MPI_Bcast(x, 2, MPI_FLOAT, 0, MPI_COMM_WORLD);
      else if (!strcmp(op, "scatter"))
        MPI_Scatter(x, 1, MPI_FLOAT, y, 1, MPI_FLOAT, 0, MPI_COMM_WORLD);
      else
        MPI_Reduce(x, y, 2, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD);
      double d = MPI_Wtime() - tc;
      if (pass && d > 3e-3) {
        stalls++;
        stalled += d;
      }
      if (pass && d > worst) worst = d;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (pass)
      printf("rank %d: MPI %s %.2f us/call; %d calls > 3 ms (%.0f ms), worst %.1f ms\n", rank, op,
             (MPI_Wtime() - t0) / n * 1e6, stalls, stalled * 1e3, worst * 1e3);
  }
  {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("rank %d cpu %.2f us/call vcsw %.3f ivcsw %.3f /call\n", rank,
           (ru.ru_utime.tv_sec * 1e6 + ru.ru_utime.tv_usec + ru.ru_stime.tv_sec * 1e6 +
            ru.ru_stime.tv_usec) /
               (1.1 * n),
           ru.ru_nvcsw / (1.1 * n), ru.ru_nivcsw / (1.1 * n));
  }
  MPI_Finalize();
}
