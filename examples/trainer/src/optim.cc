#include "optim.h"

#include <cmath>

namespace trainer {
namespace {

class Sgd final : public Optimizer {
 public:
  Sgd(int64_t numel, const SgdOptions& options) : options_(options), velocity_(numel, 0.0f) {}
  std::string name() const override { return "sgd"; }
  std::vector<std::vector<float>*> stateBuffers() override { return {&velocity_}; }
  int64_t& stepCount() override { return steps_; }

  void step(ParameterStore<float>& params, double lr) override {
    const float mu = float(options_.momentum), l = float(lr), wd = float(options_.weightDecay);
    for (const ParamInfo& info : params.infos()) {
      float* p = params.data() + info.offset;
      const float* g = params.grads() + info.offset;
      float* v = velocity_.data() + info.offset;
      const float decay = info.decay ? wd : 0.0f;
      for (int64_t i = 0; i < info.count; i++) {
        float grad = g[i] + decay * p[i];
        v[i] = mu * v[i] + grad;  // PyTorch's form (dampening 0)
        p[i] -= l * v[i];
      }
    }
    steps_++;
  }

 private:
  SgdOptions options_;
  std::vector<float> velocity_;
  int64_t steps_ = 0;
};

class AdamW final : public Optimizer {
 public:
  AdamW(int64_t numel, const AdamWOptions& options)
      : options_(options), m_(numel, 0.0f), v_(numel, 0.0f) {}
  std::string name() const override { return "adamw"; }
  std::vector<std::vector<float>*> stateBuffers() override { return {&m_, &v_}; }
  int64_t& stepCount() override { return steps_; }

  void step(ParameterStore<float>& params, double lr) override {
    steps_++;
    const double b1 = options_.beta1, b2 = options_.beta2;
    const float c1 = float(1.0 / (1.0 - std::pow(b1, double(steps_))));
    const float c2 = float(1.0 / (1.0 - std::pow(b2, double(steps_))));
    const float fb1 = float(b1), fb2 = float(b2), eps = float(options_.eps), l = float(lr);
    for (const ParamInfo& info : params.infos()) {
      float* p = params.data() + info.offset;
      const float* g = params.grads() + info.offset;
      float* m = m_.data() + info.offset;
      float* v = v_.data() + info.offset;
      const float shrink = info.decay ? float(1.0 - lr * options_.weightDecay) : 1.0f;
      for (int64_t i = 0; i < info.count; i++) {
        m[i] = fb1 * m[i] + (1 - fb1) * g[i];
        v[i] = fb2 * v[i] + (1 - fb2) * g[i] * g[i];
        p[i] *= shrink;  // decoupled weight decay
        p[i] -= l * (m[i] * c1) / (std::sqrt(v[i] * c2) + eps);
      }
    }
  }

 private:
  AdamWOptions options_;
  std::vector<float> m_, v_;
  int64_t steps_ = 0;
};

}  // namespace

std::unique_ptr<Optimizer> makeSgd(int64_t numel, const SgdOptions& options) {
  return std::make_unique<Sgd>(numel, options);
}

std::unique_ptr<Optimizer> makeAdamW(int64_t numel, const AdamWOptions& options) {
  return std::make_unique<AdamW>(numel, options);
}

double learningRate(double peak, int64_t step, int64_t warmup, int64_t totalSteps) {
  if (warmup > 0 && step < warmup) return peak * double(step + 1) / double(warmup);
  if (totalSteps <= warmup) return peak;
  double remaining = double(totalSteps - step) / double(totalSteps - warmup);
  return peak * std::max(0.0, remaining);
}

double clipGradNorm(ParameterStore<float>& params, double maxNorm) {
  double sum = 0;
  const float* g = params.grads();
  for (int64_t i = 0; i < params.numel(); i++) sum += double(g[i]) * double(g[i]);
  double norm = std::sqrt(sum);
  if (maxNorm > 0 && norm > maxNorm) {
    float scale = float(maxNorm / (norm + 1e-6));
    float* gw = params.grads();
    for (int64_t i = 0; i < params.numel(); i++) gw[i] *= scale;
  }
  return norm;
}

}  // namespace trainer
