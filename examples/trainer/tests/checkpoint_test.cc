// Save at step k, resume in a fresh trainer, and the following steps match an uninterrupted
// run bit for bit; missing, corrupt and mismatched checkpoints give clear errors.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <iterator>

#include "ringlet/error.h"
#include "test_options.h"

namespace trainer::testing {
namespace {

std::string tempPath(const std::string& name) {
  return ::testing::TempDir() + "ringlet_trainer_" + name + "_" + std::to_string(::getpid());
}

void expectResumeMatches(const TrainOptions& options, int64_t k) {
  const std::string path = tempPath(options.model.model + options.model.task);
  std::vector<double> straight, resumed;
  std::vector<float> straightParams;
  {
    Trainer a(options);
    for (int64_t i = 0; i < k; i++) a.trainStep();
    a.saveCheckpoint(path);
    while (a.step() < options.steps) straight.push_back(a.trainStep().loss);
    straightParams.assign(a.params().data(), a.params().data() + a.params().numel());
  }
  Trainer b(options);
  b.loadCheckpoint(path);
  EXPECT_EQ(b.step(), k);
  while (b.step() < options.steps) resumed.push_back(b.trainStep().loss);
  ASSERT_EQ(straight.size(), resumed.size());
  for (size_t i = 0; i < straight.size(); i++) {
    EXPECT_EQ(straight[i], resumed[i]) << "loss differs at step " << k + i + 1;
  }
  std::vector<float> resumedParams(b.params().data(), b.params().data() + b.params().numel());
  EXPECT_TRUE(straightParams == resumedParams) << "parameters differ after resuming";
  std::remove(path.c_str());
}

TEST(Checkpoint, MlpResumeIsBitExact) { expectResumeMatches(mlpOptions(30), 12); }

TEST(Checkpoint, BertResumeWithDropoutIsBitExact) {
  TrainOptions o = tinyBertOptions("mlm", 8);
  o.model.layers = 1;
  expectResumeMatches(o, 3);
}

TEST(Checkpoint, SgdResumeIsBitExact) {
  TrainOptions o = mlpOptions(20);
  o.optimizer = "sgd";
  o.lr = 0.05;
  expectResumeMatches(o, 7);
}

TEST(Checkpoint, MissingFileIsAClearError) {
  Trainer t(mlpOptions(5));
  try {
    t.loadCheckpoint("/nonexistent/dir/ckpt.bin");
    FAIL() << "no error";
  } catch (const ringlet::IoError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/dir/ckpt.bin"), std::string::npos)
        << e.what();
  }
}

TEST(Checkpoint, CorruptFilesAreClearErrors) {
  const std::string path = tempPath("corrupt");
  Trainer t(mlpOptions(5));
  t.trainStep();
  t.saveCheckpoint(path);
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  auto writeAndLoad = [&](const std::string& content) -> std::string {
    {
      std::ofstream out(path, std::ios::binary | std::ios::trunc);
      out << content;
    }
    Trainer fresh(mlpOptions(5));
    try {
      fresh.loadCheckpoint(path);
    } catch (const ringlet::IoError& e) {
      return e.what();
    }
    return "no error";
  };
  std::string flipped = bytes;
  flipped[flipped.size() / 2] ^= 0x40;
  EXPECT_NE(writeAndLoad(flipped).find("checksum mismatch"), std::string::npos);
  EXPECT_NE(writeAndLoad(bytes.substr(0, bytes.size() / 3)).find("corrupt"), std::string::npos);
  EXPECT_NE(writeAndLoad("").find("corrupt"), std::string::npos);
  EXPECT_NE(writeAndLoad("not a checkpoint at all, just some text").find("bad magic"),
            std::string::npos);
  std::remove(path.c_str());
}

TEST(Checkpoint, DifferentModelIsRefused) {
  const std::string path = tempPath("mismatch");
  Trainer a(mlpOptions(5));
  a.saveCheckpoint(path);
  TrainOptions other = mlpOptions(5);
  other.model.mlpHidden = 32;
  Trainer b(other);
  try {
    b.loadCheckpoint(path);
    FAIL() << "no error";
  } catch (const ringlet::InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("different model"), std::string::npos) << e.what();
  }
  std::remove(path.c_str());
}

}  // namespace
}  // namespace trainer::testing
