// Checkpoint file: "RGLTCKPT", u32 version, u64 header length, a JSON header (step, random
// generator states, parameter layout, optimizer), the parameter arena and each optimizer state
// buffer as raw float32, then a u64 FNV-1a checksum of everything before it. Written to a
// temporary file and renamed, so a crash never leaves a half-written checkpoint in place.
#include <fmt/format.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "ringlet/error.h"
#include "trainer.h"

namespace trainer {
namespace {

constexpr char kMagic[8] = {'R', 'G', 'L', 'T', 'C', 'K', 'P', 'T'};
constexpr uint32_t kVersion = 1;

uint64_t fnv1a(const char* data, size_t n) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (size_t i = 0; i < n; i++) {
    h ^= static_cast<unsigned char>(data[i]);
    h *= 0x100000001b3ULL;
  }
  return h;
}

template <typename V>
void append(std::string& out, const V& value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof(V));
}

nlohmann::json layoutJson(const ParameterStore<float>& params) {
  nlohmann::json layout = nlohmann::json::array();
  for (const ParamInfo& p : params.infos()) {
    layout.push_back({{"name", p.name}, {"shape", p.shape}});
  }
  return layout;
}

}  // namespace

void Trainer::saveCheckpoint(const std::string& path, const nlohmann::json& extra) const {
  auto& self = const_cast<Trainer&>(*this);
  const ParameterStore<float>& params = workload_->params();
  std::vector<std::vector<float>*> state = self.optimizer_->stateBuffers();
  nlohmann::json header = {
      {"step", step_},
      {"batchesDrawn", batchesDrawn_},
      {"model", options_.model.model},
      {"task", options_.model.task},
      {"optimizer", optimizer_->name()},
      {"optimizerSteps", self.optimizer_->stepCount()},
      {"stateBuffers", state.size()},
      {"numel", params.numel()},
      {"dataRng", dataRng_.state()},
      {"dropoutRng", dropoutRng_.state()},
      {"params", layoutJson(params)},
  };
  if (!extra.is_null()) header["extra"] = extra;
  std::string text = header.dump();
  std::string out(kMagic, sizeof(kMagic));
  append(out, kVersion);
  append(out, static_cast<uint64_t>(text.size()));
  out += text;
  out.append(reinterpret_cast<const char*>(params.data()), params.numel() * sizeof(float));
  for (const std::vector<float>* buffer : state) {
    out.append(reinterpret_cast<const char*>(buffer->data()), buffer->size() * sizeof(float));
  }
  append(out, fnv1a(out.data(), out.size()));

  const std::string tmp = path + ".tmp";
  {
    std::ofstream file(tmp, std::ios::binary | std::ios::trunc);
    if (!file) throw ringlet::IoError(fmt::format("cannot create checkpoint file {}", tmp));
    file.write(out.data(), static_cast<std::streamsize>(out.size()));
    file.flush();
    if (!file) throw ringlet::IoError(fmt::format("cannot write checkpoint file {}", tmp));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    throw ringlet::IoError(
        fmt::format("cannot rename {} to {}: {}", tmp, path, std::strerror(errno)));
  }
}

nlohmann::json Trainer::loadCheckpoint(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw ringlet::IoError(fmt::format("cannot open checkpoint {}", path));
  std::stringstream ss;
  ss << file.rdbuf();
  const std::string in = ss.str();
  auto corrupt = [&](const std::string& why) {
    return ringlet::IoError(
        fmt::format("checkpoint {} is corrupt or not a checkpoint: {}", path, why));
  };
  const size_t fixed = sizeof(kMagic) + sizeof(uint32_t) + 2 * sizeof(uint64_t);
  if (in.size() < fixed) throw corrupt(fmt::format("only {} bytes", in.size()));
  if (std::memcmp(in.data(), kMagic, sizeof(kMagic)) != 0) throw corrupt("bad magic");
  uint32_t version;
  std::memcpy(&version, in.data() + 8, sizeof(version));
  if (version != kVersion)
    throw corrupt(fmt::format("version {} (expected {})", version, kVersion));
  uint64_t stored;
  std::memcpy(&stored, in.data() + in.size() - sizeof(stored), sizeof(stored));
  if (stored != fnv1a(in.data(), in.size() - sizeof(stored))) throw corrupt("checksum mismatch");
  uint64_t headerBytes;
  std::memcpy(&headerBytes, in.data() + 12, sizeof(headerBytes));
  if (headerBytes > in.size() - fixed) throw corrupt("header length past the end");
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(in.substr(20, headerBytes));
  } catch (const std::exception& e) {
    throw corrupt(fmt::format("header: {}", e.what()));
  }

  ParameterStore<float>& params = workload_->params();
  std::vector<std::vector<float>*> state = optimizer_->stateBuffers();
  try {
    if (header.at("params") != layoutJson(params)) {
      throw ringlet::InvalidArgument(
          fmt::format("checkpoint {} holds a different model ({} {}, {} parameters) than this run "
                      "({} {}, {} parameters)",
                      path, header.at("model").get<std::string>(),
                      header.at("task").get<std::string>(), header.at("numel").get<int64_t>(),
                      options_.model.model, options_.model.task, params.numel()));
    }
    if (header.at("optimizer") != optimizer_->name()) {
      throw ringlet::InvalidArgument(
          fmt::format("checkpoint {} was made with optimizer {}, this run uses {}", path,
                      header.at("optimizer").get<std::string>(), optimizer_->name()));
    }
    size_t expected = fixed + headerBytes + params.numel() * sizeof(float) * (1 + state.size());
    if (header.at("stateBuffers").get<size_t>() != state.size() || in.size() != expected) {
      throw corrupt(fmt::format("{} bytes, expected {}", in.size(), expected));
    }
    const char* p = in.data() + 20 + headerBytes;
    std::memcpy(params.data(), p, params.numel() * sizeof(float));
    p += params.numel() * sizeof(float);
    for (std::vector<float>* buffer : state) {
      std::memcpy(buffer->data(), p, buffer->size() * sizeof(float));
      p += buffer->size() * sizeof(float);
    }
    step_ = header.at("step").get<int64_t>();
    batchesDrawn_ = header.value("batchesDrawn", step_);
    optimizer_->stepCount() = header.at("optimizerSteps").get<int64_t>();
    dataRng_.setState(header.at("dataRng").get<Rng::State>());
    dropoutRng_.setState(header.at("dropoutRng").get<Rng::State>());
  } catch (const nlohmann::json::exception& e) {
    throw corrupt(fmt::format("header: {}", e.what()));
  }
  return header.value("extra", nlohmann::json());
}

}  // namespace trainer
