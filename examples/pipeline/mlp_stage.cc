#include "mlp_stage.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <random>

namespace pipeline {

MlpStage::MlpStage(int first, int last, int total, int64_t width, uint64_t seed)
    : first_(first), last_(last), total_(total), width_(width) {
  for (int l = first; l < last; l++) {
    std::mt19937_64 rng(seed * 1000 + uint64_t(l));
    std::normal_distribution<float> normal(0.0f, 1.0f / std::sqrt(float(width)));
    std::vector<float> w(width * width);
    for (float& x : w) x = normal(rng);
    w_.push_back(std::move(w));
    b_.emplace_back(width, 0.01f);
    dw_.emplace_back(width * width, 0.0f);
    db_.emplace_back(width, 0.0f);
  }
}

void MlpStage::forward(int mb, const float* in, float* out, int64_t rows) {
  if (int(acts_.size()) <= mb) acts_.resize(mb + 1);
  auto& acts = acts_[mb];
  const int n = last_ - first_;
  acts.resize(n + 1);
  acts[0].assign(in, in + rows * width_);
  for (int k = 0; k < n; k++) {
    std::vector<float>& y = acts[k + 1];
    y.resize(rows * width_);
    for (int64_t r = 0; r < rows; r++) std::copy(b_[k].begin(), b_[k].end(), &y[r * width_]);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(rows), int(width_), int(width_), 1.0f,
                acts[k].data(), int(width_), w_[k].data(), int(width_), 1.0f, y.data(),
                int(width_));
    if (first_ + k + 1 < total_) {
      for (float& v : y) v = std::max(v, 0.0f);  // ReLU, not after the model's last layer
    }
  }
  std::copy(acts[n].begin(), acts[n].end(), out);
}

void MlpStage::backward(int mb, const float* dOut, float* dIn, int64_t rows) {
  auto& acts = acts_.at(mb);
  const int n = last_ - first_;
  std::vector<float> d(dOut, dOut + rows * width_), dPrev(rows * width_);
  for (int k = n - 1; k >= 0; k--) {
    if (first_ + k + 1 < total_) {  // through the ReLU that produced acts[k + 1]
      for (size_t i = 0; i < d.size(); i++) d[i] = acts[k + 1][i] > 0 ? d[i] : 0.0f;
    }
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, int(width_), int(width_), int(rows), 1.0f,
                d.data(), int(width_), acts[k].data(), int(width_), 1.0f, dw_[k].data(),
                int(width_));
    for (int64_t r = 0; r < rows; r++)
      for (int64_t j = 0; j < width_; j++) db_[k][j] += d[r * width_ + j];
    if (k == 0 && dIn == nullptr) break;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(rows), int(width_), int(width_),
                1.0f, d.data(), int(width_), w_[k].data(), int(width_), 0.0f, dPrev.data(),
                int(width_));
    std::swap(d, dPrev);
  }
  if (dIn) std::copy(d.begin(), d.end(), dIn);
}

void MlpStage::zeroGrads() {
  for (auto& g : dw_) std::fill(g.begin(), g.end(), 0.0f);
  for (auto& g : db_) std::fill(g.begin(), g.end(), 0.0f);
}

void MlpStage::sgdStep(float lr) {
  for (size_t k = 0; k < w_.size(); k++) {
    for (size_t i = 0; i < w_[k].size(); i++) w_[k][i] -= lr * dw_[k][i];
    for (size_t i = 0; i < b_[k].size(); i++) b_[k][i] -= lr * db_[k][i];
  }
}

std::vector<float> MlpStage::flatParams() const {
  std::vector<float> out;
  for (size_t k = 0; k < w_.size(); k++) {
    out.insert(out.end(), w_[k].begin(), w_[k].end());
    out.insert(out.end(), b_[k].begin(), b_[k].end());
  }
  return out;
}

double mseLossGrad(const float* out, const float* target, float* dOut, int64_t rows, int64_t width,
                   int64_t totalRows) {
  double sum = 0;
  const float scale = 2.0f / float(totalRows * width);
  for (int64_t i = 0; i < rows * width; i++) {
    const float e = out[i] - target[i];
    sum += double(e) * e;
    dOut[i] = scale * e;
  }
  return sum / double(totalRows * width);
}

}  // namespace pipeline
