#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <sstream>

#include "data.h"
#include "ringlet/error.h"

namespace trainer {
namespace {

std::vector<std::string> splitWords(const std::string& text) {
  std::vector<std::string> words;
  std::string cur;
  auto flush = [&] {
    if (!cur.empty()) words.push_back(std::move(cur));
    cur.clear();
  };
  for (char ch : text) {
    unsigned char c = static_cast<unsigned char>(ch);
    if (std::isspace(c)) {
      flush();
    } else if (std::ispunct(c)) {
      flush();
      words.emplace_back(1, ch);
    } else {
      cur.push_back(static_cast<char>(std::tolower(c)));
    }
  }
  flush();
  return words;
}

}  // namespace

WordTokenizer WordTokenizer::fromText(const std::string& text) {
  std::map<std::string, int64_t> counts;
  for (const std::string& w : splitWords(text)) counts[w]++;
  std::vector<std::pair<std::string, int64_t>> sorted(counts.begin(), counts.end());
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  WordTokenizer tok;
  tok.words_ = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
  for (auto& [w, n] : sorted) tok.words_.push_back(w);
  for (size_t i = 0; i < tok.words_.size(); i++) tok.ids_[tok.words_[i]] = int32_t(i);
  return tok;
}

std::vector<int32_t> WordTokenizer::encode(const std::string& text) const {
  std::vector<int32_t> ids;
  for (const std::string& w : splitWords(text)) {
    auto it = ids_.find(w);
    ids.push_back(it == ids_.end() ? kUnk : it->second);
  }
  return ids;
}

std::string defaultCorpusPath() { return std::string(RINGLET_TRAINER_DATA_DIR) + "/corpus.txt"; }

TextCorpus loadCorpus(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ringlet::IoError(fmt::format("cannot open corpus {}", path));
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  TextCorpus corpus;
  corpus.tokenizer = WordTokenizer::fromText(text);
  std::vector<int32_t> all = corpus.tokenizer.encode(text);
  if (all.size() < 1000) {
    throw ringlet::IoError(fmt::format("corpus {} has only {} tokens", path, all.size()));
  }
  size_t split = all.size() * 9 / 10;
  corpus.train.assign(all.begin(), all.begin() + split);
  corpus.heldOut.assign(all.begin() + split, all.end());
  std::vector<int64_t> counts(corpus.tokenizer.vocabSize(), 0);
  for (int32_t id : corpus.train) counts[id]++;
  double n = double(corpus.train.size());
  for (int64_t c : counts) {
    if (c > 0) corpus.unigramEntropy -= double(c) / n * std::log(double(c) / n);
  }
  return corpus;
}

namespace {
void fillWindow(Batch& batch, int64_t b, const std::vector<int32_t>& stream, int64_t start) {
  const int64_t T = batch.seqLen;
  int32_t* row = batch.ids.data() + b * T;
  row[0] = kCls;
  for (int64_t t = 1; t < T - 1; t++) row[t] = stream[(start + t - 1) % stream.size()];
  row[T - 1] = kSep;
}

Batch emptyTextBatch(int64_t B, int64_t T) {
  if (T < 3) throw ringlet::InvalidArgument(fmt::format("text windows need T >= 3, got {}", T));
  Batch batch;
  batch.size = B;
  batch.seqLen = T;
  batch.ids.resize(B * T);
  batch.keyValid.assign(B * T, 1);
  batch.labels.assign(B * T, -100);
  return batch;
}
}  // namespace

Batch textWindows(const std::vector<int32_t>& stream, int64_t B, int64_t T, Rng& rng) {
  Batch batch = emptyTextBatch(B, T);
  for (int64_t b = 0; b < B; b++) {
    fillWindow(batch, b, stream, static_cast<int64_t>(rng.below(stream.size())));
  }
  return batch;
}

Batch textWindowsAt(const std::vector<int32_t>& stream, int64_t first, int64_t B, int64_t T) {
  Batch batch = emptyTextBatch(B, T);
  for (int64_t b = 0; b < B; b++) fillWindow(batch, b, stream, (first + b) * (T - 2));
  return batch;
}

void maskTokens(Batch& batch, int64_t vocabSize, Rng& rng) {
  for (size_t i = 0; i < batch.ids.size(); i++) {
    batch.labels[i] = -100;
    int32_t id = batch.ids[i];
    if (id < kNumSpecial || batch.keyValid[i] == 0) continue;
    if (rng.uniform() >= 0.15) continue;
    batch.labels[i] = id;
    double r = rng.uniform();
    if (r < 0.8) {
      batch.ids[i] = kMask;
    } else if (r < 0.9) {
      batch.ids[i] = static_cast<int32_t>(kNumSpecial + rng.below(vocabSize - kNumSpecial));
    }
  }
}

Batch syntheticClassification(int64_t B, int64_t T, Rng& rng) {
  if (T < 4) throw ringlet::InvalidArgument(fmt::format("synthetic task needs T >= 4, got {}", T));
  Batch batch;
  batch.size = B;
  batch.seqLen = T;
  batch.ids.assign(B * T, kPad);
  batch.keyValid.assign(B * T, 0);
  batch.labels.resize(B);
  for (int64_t b = 0; b < B; b++) {
    // An odd count of content tokens in [T/2, T-1], so the two groups never tie.
    int64_t n = T / 2 + static_cast<int64_t>(rng.below(T - T / 2));
    if (n % 2 == 0) n--;
    int64_t a = 0;
    int32_t* row = batch.ids.data() + b * T;
    row[0] = kCls;
    batch.keyValid[b * T] = 1;
    for (int64_t t = 1; t <= n; t++) {
      bool groupA = rng.uniform() < 0.5;
      a += groupA ? 1 : 0;
      row[t] = static_cast<int32_t>(kNumSpecial + (groupA ? 0 : kSyntheticGroup) +
                                    rng.below(kSyntheticGroup));
      batch.keyValid[b * T + t] = 1;
    }
    batch.labels[b] = 2 * a > n ? 1 : 0;
  }
  return batch;
}

}  // namespace trainer
