// Wrong shapes name the op and both shapes; bad command lines and checkpoints give one
// "ringlet:" line and a non-zero exit from ringlet-train.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>

#include "ops.h"
#include "ringlet/error.h"
#include "rng.h"

namespace trainer {
namespace {

using TensorF = Tensor<float>;

std::string errorOf(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const ringlet::InvalidArgument& e) {
    return e.what();
  }
  return "no error";
}

void expectMentions(const std::string& message, std::initializer_list<std::string> parts) {
  for (const std::string& p : parts) {
    EXPECT_NE(message.find(p), std::string::npos) << "'" << message << "' lacks '" << p << "'";
  }
}

TEST(BadInput, ShapeErrorsNameOpAndBothShapes) {
  TensorF x = TensorF::zeros({4, 5}, true), w = TensorF::zeros({3, 6}, true);
  TensorF b = TensorF::zeros({7}, true);
  expectMentions(errorOf([&] { matmul(x, w); }), {"matmul", "[4, 5]", "[3, 6]"});
  expectMentions(errorOf([&] { addBias(x, b); }), {"addBias", "[4, 5]", "[7]"});
  expectMentions(errorOf([&] {
                   add(x, TensorF::zeros({5, 4}, false));
                 }),
                 {"add", "[4, 5]", "[5, 4]"});
  expectMentions(errorOf([&] { layerNorm(x, b, b, 1e-12); }), {"layerNorm", "[4, 5]", "[7]"});
  expectMentions(errorOf([&] { crossEntropy(x, {0, 1}); }), {"crossEntropy", "[4, 5]", "[2]"});
  expectMentions(errorOf([&] { view(x, {3, 3}); }), {"view", "[4, 5]", "[3, 3]"});
}

TEST(BadInput, OutOfRangeIdsAndTargets) {
  TensorF table = TensorF::zeros({4, 2}, true);
  expectMentions(errorOf([&] { embedding({0, 4}, {2}, table); }), {"embedding", "id 4", "4 rows"});
  TensorF logits = TensorF::zeros({2, 3}, true);
  expectMentions(errorOf([&] { crossEntropy(logits, {0, 3}); }), {"crossEntropy", "target 3"});
  Rng rng(1);
  TensorF qkv = TensorF::zeros({1, 2, 9}, true);
  expectMentions(errorOf([&] {
                   attention(qkv, {1, 1}, 2, 0.0, true, rng);
                 }),
                 {"attention", "not divisible by 2 heads"});
  expectMentions(errorOf([&] { dropout(qkv, 1.5, true, rng); }), {"dropout", "1.5"});
}

// Runs ringlet-train with arguments; returns (exit code, combined output).
std::pair<int, std::string> runTrain(const std::string& args) {
  std::string cmd = std::string(RINGLET_TRAIN_BINARY) + " " + args + " 2>&1";
  std::FILE* pipe = ::popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 512> buf{};
  while (std::fgets(buf.data(), buf.size(), pipe) != nullptr) out += buf.data();
  int status = ::pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

TEST(BadInput, CommandLineErrorsAreOneRingletLine) {
  auto [code, out] = runTrain("--model resnet");
  EXPECT_NE(code, 0);
  EXPECT_EQ(out.rfind("ringlet: ", 0), 0u) << out;
  EXPECT_NE(out.find("resnet"), std::string::npos) << out;

  std::tie(code, out) = runTrain("--model mlp --steps 2 --resume /nonexistent/ckpt --plot ''");
  EXPECT_NE(code, 0);
  EXPECT_NE(out.find("ringlet: cannot open checkpoint /nonexistent/ckpt"), std::string::npos)
      << out;
}

}  // namespace
}  // namespace trainer
