#include <cmath>

#include "data.h"

namespace trainer {

SpiralSet makeSpirals(int64_t perClass, int64_t classes, double noise, uint64_t seed) {
  Rng rng(seed);
  SpiralSet set;
  set.n = perClass * classes;
  set.classes = classes;
  set.x.resize(2 * set.n);
  set.y.resize(set.n);
  for (int64_t c = 0; c < classes; c++) {
    for (int64_t i = 0; i < perClass; i++) {
      double r = double(i + 1) / double(perClass);  // radius 0..1
      double angle = 4.0 * r + 2.0 * M_PI * double(c) / double(classes);
      int64_t k = c * perClass + i;
      set.x[2 * k] = float(r * std::sin(angle) + noise * rng.normal());
      set.x[2 * k + 1] = float(r * std::cos(angle) + noise * rng.normal());
      set.y[k] = static_cast<int32_t>(c);
    }
  }
  return set;
}

Batch spiralBatch(const SpiralSet& set, int64_t B, Rng& rng) {
  Batch batch;
  batch.size = B;
  batch.features.resize(2 * B);
  batch.labels.resize(B);
  for (int64_t b = 0; b < B; b++) {
    int64_t k = static_cast<int64_t>(rng.below(set.n));
    batch.features[2 * b] = set.x[2 * k];
    batch.features[2 * b + 1] = set.x[2 * k + 1];
    batch.labels[b] = set.y[k];
  }
  return batch;
}

Batch spiralSlice(const SpiralSet& set, int64_t start, int64_t B) {
  Batch batch;
  batch.size = std::min(B, set.n - start);
  batch.features.assign(set.x.begin() + 2 * start, set.x.begin() + 2 * (start + batch.size));
  batch.labels.assign(set.y.begin() + start, set.y.begin() + start + batch.size);
  return batch;
}

}  // namespace trainer

namespace trainer {

Batch spiralRows(const SpiralSet& set, const std::vector<int64_t>& indices) {
  Batch batch;
  batch.size = static_cast<int64_t>(indices.size());
  batch.features.resize(2 * indices.size());
  batch.labels.resize(indices.size());
  for (size_t b = 0; b < indices.size(); b++) {
    const int64_t k = indices[b];
    batch.features[2 * b] = set.x[2 * k];
    batch.features[2 * b + 1] = set.x[2 * k + 1];
    batch.labels[b] = set.y[k];
  }
  return batch;
}

void appendBatch(Batch& into, const Batch& more) {
  if (into.size == 0) {
    into = more;
    return;
  }
  into.size += more.size;
  into.features.insert(into.features.end(), more.features.begin(), more.features.end());
  into.ids.insert(into.ids.end(), more.ids.begin(), more.ids.end());
  into.keyValid.insert(into.keyValid.end(), more.keyValid.begin(), more.keyValid.end());
  into.labels.insert(into.labels.end(), more.labels.begin(), more.labels.end());
}

uint64_t exampleSeed(uint64_t seed, int64_t index) {
  uint64_t z = seed * 0x9e3779b97f4a7c15ULL + static_cast<uint64_t>(index);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace trainer
