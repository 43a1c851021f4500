#pragma once
// The nccl-tests text table, printed by rank 0 to stdout:
//
//   #       size      count   type  redop  root     time   algbw   busbw  #wrong
//   #        (B) (elements)                          (us)  (GB/s)  (GB/s)
//            8          2  float32    sum    -1     12.3    0.00    0.00       0
//
// With --inplace 1 an in-place group follows; with --vs-mpi an MPI group and the ratio
// MPI time / ringlet time (> 1: ringlet is faster).

#include <cstdio>
#include <vector>

#include "bench/report.h"

namespace ringlet::bench {

void printRunHeader(std::FILE* out, const RunInfo& info);
void printTableHeader(std::FILE* out, const RunInfo& info, BenchOp op);
void printRow(std::FILE* out, const RunInfo& info, const Row& row);
void printFooter(std::FILE* out, const RunInfo& info, const std::vector<Row>& rows);

}  // namespace ringlet::bench
