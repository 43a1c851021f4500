#pragma once
// ringlet-model's measurement: each algorithm of a collective timed on this job's links, beside
// the cost model's prediction for it.

#include <nlohmann/json.hpp>

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "ringlet/ringlet.h"

namespace ringlet::model {

struct MeasureOptions {
  std::vector<std::string> collectives = {"allreduce", "allgather", "reducescatter", "broadcast"};
  size_t minBytes = 1024;
  size_t maxBytes = size_t{64} << 20;
  int factor = 4;
  int repeats = 7;              // the median (and the fastest) of these is reported
  double batchSeconds = 0.004;  // each repeat times enough calls to last about this long
  // Untimed calls first, at least this long per size (as ringlet-bench's --warmup-ms): with two
  // calls only, the first algorithm timed ran cold (a fresh communicator's links, 2 ranks on a
  // 2-core VM: recursive doubling 64 KiB-1 MiB 1.4-5.8x its time in ringlet-bench, which put the
  // model's error there at -27% to -83%).
  double warmSeconds = 0.02;
  // Measure the cost model again before every row (Communicator::recalibrate) and predict the
  // row with it: what the model gets right where the machine held still from its calibration to
  // the row, apart from how far the machine moved since the first calibration (whose prediction
  // each row keeps as predicted_first_s).
  bool recalibrate = false;
};

// Throws InvalidArgument naming a collective measure() cannot time (it times allreduce,
// broadcast, reduce, allgather, reducescatter, alltoall, gather and scatter).
void checkMeasurable(const std::vector<std::string>& collectives);

// Collective over `comm`: times every algorithm of every collective in `options` at each size
// (the max over ranks of the mean time per call in a batch; the median of the batches) and
// predicts it with comm.costModel(). Every rank returns the same rows:
//   {collective, algorithm, bytes, measured_s (median), fastest_s, predicted_s, busbw_gbps,
//    terms: the prediction per unit of alpha, beta, gamma, delta (the model is linear in them),
//    round_trip_s: [roundTrip() before the row, after it] (on more than one rank);
//    with options.recalibrate: model, the one measured just before the row and predicted with,
//    and predicted_first_s, comm's model's prediction at the start}
nlohmann::ordered_json measure(Communicator& comm, const MeasureOptions& options);

// How steady the machine stayed over a run of measure(): one row (the first collective's first
// algorithm, at the size of the sweep nearest 1 MiB) timed before every other row and again after
// all of them, as measure() times it:
//   {collective, algorithm, bytes, start_s, end_s}
// A model calibrated at the start is judged by its predictions within 25% of the measured times;
// where this row's two timings differ by more than that, so may the run's other timings from what
// the same calibration would have met. `timeRows` runs measure() (or anything) between the two.
nlohmann::ordered_json gauge(Communicator& comm, const MeasureOptions& options,
                             const std::function<void()>& timeRows);

// Collective over `comm`: the time of an 8-byte round trip between ranks 0 and 1 (point-to-point,
// the median of 7 groups of 100; 0 on one rank). It tells where the ranks run on the machine: on a
// 2-core AMD EPYC VM the host moved the two vCPUs every few seconds between one core's two threads,
// two cores that share a cache and two that do not (a cache line's round trip 56, 130 and 550 ns),
// and the same 1 MiB all-reduce took 136, 80 and 270-300 us there. measure() times it before and
// after every row, main.cc judges the predictions of rows timed where it stayed near its time at
// the start apart from the others.
double roundTrip(Communicator& comm);

// A report of measure() (with describe()'s header) predicted again with this build's formulas:
// every row's predicted_s and terms, from the report's own model. For trying a change of the
// formulas on stored reports. Throws InvalidArgument naming what the report lacks.
nlohmann::ordered_json repredict(const nlohmann::ordered_json& report);

// The report's header: ranks, links, the model's parameters.
nlohmann::ordered_json describe(const Communicator& comm);

}  // namespace ringlet::model
