#pragma once
// The nccl-tests text table, printed by rank 0 to stdout, one section per operation:
//
//   # allgather: algorithm auto
//   #       size      count   type  redop  root     time   algbw   busbw  #wrong    copy bus/copy
//   #        (B) (elements)                          (us)  (GB/s)  (GB/s)          (GB/s)
//          1020        255  float32   none    -1     12.3    0.08    0.06       0     9.1    0.006
//
// With --inplace 1 an in-place group follows the first (ops with an in-place form); with
// --vs-mpi an MPI group and the ratio MPI time / ringlet time (> 1: ringlet is faster); then the
// copy reference of the same size and busbw / copy (not for barrier).

#include <cstdio>
#include <vector>

#include "bench/report.h"

namespace ringlet::bench {

void printRunHeader(std::FILE* out, const RunInfo& info);
void printTableHeader(std::FILE* out, const RunInfo& info, BenchOp op);
void printRow(std::FILE* out, const RunInfo& info, const Row& row);
void printFooter(std::FILE* out, const RunInfo& info, const std::vector<Row>& rows);

}  // namespace ringlet::bench
