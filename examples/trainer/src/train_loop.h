#pragma once
// The body of ringlet-train's loop, written as an Accelerate script is: one optimizer step and
// one evaluation, on any number of ranks (one process included). Collective.

#include "accelerator.h"

namespace trainer {

// Draws the step's micro-batches (gradientAccumulationSteps of them), runs forward and backward
// on each inside accelerator.accumulate() (gradients all-reduced on the last only), steps the
// optimizer and zeroes the gradients. The loss is the mean over every counted target of the
// global batch, as one process would take it over all of it (masked-LM counts differ per
// batch): each micro-batch's mean loss is weighted by ranks x its share of the step's targets.
// Returns the step's statistics summed over the ranks (same on every rank); the phase times of
// the step are in accelerator.times().
StepStats trainStep(Accelerator& accelerator, Trainer& model);

// Held-out loss and accuracy over every rank's share of `data`, each example counted once
// (gatherForMetrics drops the padding). Same on every rank.
EvalResult evaluate(Accelerator& accelerator, Trainer& model, const EvalLoader& data);

}  // namespace trainer
