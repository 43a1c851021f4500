#pragma once
// Optimisers over the flat parameter and gradient arenas of a ParameterStore<float>, the
// learning-rate schedule and gradient-norm clipping.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "params.h"

namespace trainer {

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // One update of every parameter from its gradient at learning rate lr.
  virtual void step(ParameterStore<float>& params, double lr) = 0;
  virtual std::string name() const = 0;
  // Flat state buffers (for checkpoints): same length and order every time.
  virtual std::vector<std::vector<float>*> stateBuffers() = 0;
  virtual int64_t& stepCount() = 0;  // updates taken (AdamW's bias correction uses it)
};

struct SgdOptions {
  double momentum = 0.9;
  double weightDecay = 0.0;  // L2 added to the gradient of parameters marked decay
};
std::unique_ptr<Optimizer> makeSgd(int64_t numel, const SgdOptions& options);

struct AdamWOptions {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weightDecay = 0.01;  // decoupled; not applied to biases and LayerNorm parameters
};
std::unique_ptr<Optimizer> makeAdamW(int64_t numel, const AdamWOptions& options);

// Linear warm-up from 0 to peak over `warmup` steps, then linear decay to 0 at totalSteps.
double learningRate(double peak, int64_t step, int64_t warmup, int64_t totalSteps);

// Global L2 norm of all gradients; when above maxNorm (> 0), scales them down to maxNorm.
// Returns the norm before clipping.
double clipGradNorm(ParameterStore<float>& params, double maxNorm);

}  // namespace trainer
