#pragma once
// Data that needs no download: generated spirals for the MLP; a shipped text corpus with a
// word tokenizer and the masked-LM collator, and a synthetic sequence-classification task for
// the encoder. Every draw comes from an Rng the caller owns (and checkpoints).

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "rng.h"

namespace trainer {

// One mini-batch. MLP tasks fill features/labels; sequence tasks fill ids/keyValid/labels.
struct Batch {
  int64_t size = 0;               // B
  int64_t seqLen = 0;             // T (sequence tasks)
  std::vector<float> features;    // [B, F]
  std::vector<int32_t> ids;       // [B, T]
  std::vector<int32_t> keyValid;  // [B, T]: 1 for real tokens, 0 for padding
  std::vector<int32_t> labels;    // [B] (classification) or [B, T] (masked-LM, -100 = ignore)
  int64_t padding = 0;            // trailing examples that repeat others (even eval shards)
};

// Interleaved spirals: `classes` arms of `perClass` points each in 2-D, with Gaussian noise.
struct SpiralSet {
  std::vector<float> x;    // [n, 2]
  std::vector<int32_t> y;  // [n]
  int64_t n = 0;
  int64_t classes = 0;
};
SpiralSet makeSpirals(int64_t perClass, int64_t classes, double noise, uint64_t seed);
// Samples B points with replacement.
Batch spiralBatch(const SpiralSet& set, int64_t B, Rng& rng);
// Consecutive points [start, start + B) (evaluation).
Batch spiralSlice(const SpiralSet& set, int64_t start, int64_t B);
// The points with these indices, in order.
Batch spiralRows(const SpiralSet& set, const std::vector<int64_t>& indices);

// Appends one batch's examples to another of the same kind (sequence length must match).
void appendBatch(Batch& into, const Batch& more);
// A seed for example `index` under `seed` (splitmix64 of both), for per-example randomness.
uint64_t exampleSeed(uint64_t seed, int64_t index);

// Special tokens shared by the text and synthetic tasks.
inline constexpr int32_t kPad = 0, kUnk = 1, kCls = 2, kSep = 3, kMask = 4, kNumSpecial = 5;

// Lower-cases and splits on whitespace, with punctuation as separate tokens; the vocabulary is
// the special tokens followed by words by falling frequency (ties alphabetical).
class WordTokenizer {
 public:
  static WordTokenizer fromText(const std::string& text);
  std::vector<int32_t> encode(const std::string& text) const;
  int64_t vocabSize() const { return static_cast<int64_t>(words_.size()); }
  const std::string& word(int32_t id) const { return words_.at(id); }

 private:
  std::vector<std::string> words_;
  std::map<std::string, int32_t> ids_;
};

// The shipped corpus (data/corpus.txt) as one token stream, split 90/10 into train/held-out.
struct TextCorpus {
  WordTokenizer tokenizer;
  std::vector<int32_t> train, heldOut;
  // Entropy in nats of the unigram distribution of the training tokens: the masked-LM loss of
  // a model that ignores context.
  double unigramEntropy = 0;
};
TextCorpus loadCorpus(const std::string& path);  // throws IoError when unreadable
std::string defaultCorpusPath();

// [CLS] w1 .. w_{T-2} [SEP] windows from random offsets of `stream`.
Batch textWindows(const std::vector<int32_t>& stream, int64_t B, int64_t T, Rng& rng);
// Consecutive windows starting at window index `first` (evaluation; deterministic).
Batch textWindowsAt(const std::vector<int32_t>& stream, int64_t first, int64_t B, int64_t T);
// BERT's collator, in place: of the non-special real tokens, 15% are chosen; of those 80%
// become [MASK], 10% a random word, 10% stay. labels = original id where chosen, else -100.
void maskTokens(Batch& batch, int64_t vocabSize, Rng& rng);

// Synthetic sequence classification: [CLS] then an odd number of tokens, each from group A
// (ids 5..5+g) or group B (next g ids), then padding; label 1 when A tokens outnumber B.
inline constexpr int64_t kSyntheticGroup = 8;
inline constexpr int64_t kSyntheticVocab = kNumSpecial + 2 * kSyntheticGroup;
Batch syntheticClassification(int64_t B, int64_t T, Rng& rng);

}  // namespace trainer
