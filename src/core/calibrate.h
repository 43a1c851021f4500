#pragma once
// The cost model's measurement at communicator creation (calibrate.cc), kept from a disturbed
// start: two ranks of one host that begin on the same core (the scheduler spreads them a few tens
// of milliseconds later) measured every 8-byte shift as a switch between processes, 13 us against
// 0.07 (2 of 24 unbound two-rank communicators on a 2-core machine; none bound to a core each),
// and that model then chose every algorithm of the job.

#include <functional>

#include "ringlet/communicator.h"

namespace ringlet::detail {

// `measure` takes the whole model; `smallShift` times an 8-byte shift again (both collective, the
// same on every rank, so every rank decides alike). Where the shift now takes less than a third
// of the model's alpha, the ranks were held back while it was measured: it measures again, at
// most kMaxCalibrations times in all, and keeps the last.
inline constexpr int kMaxCalibrations = 3;
inline constexpr double kDisturbedAlphaRatio = 3.0;
CostModel steadyModel(const std::function<CostModel()>& measure,
                      const std::function<double()>& smallShift);

}  // namespace ringlet::detail
