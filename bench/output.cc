#include "bench/output.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "ringlet/error.h"
#include "ringlet/version.h"
#include "src/model/model_json.h"

namespace ringlet::bench {
namespace {

using nlohmann::json;

json timingJson(const Timing& t) {
  json j = {{"time_us", t.timeUs},
            {"algbw_gbs", t.algbwGBs},
            {"busbw_gbs", t.busbwGBs},
            {"iters", t.iters},
            {"warmup_iters", t.warmupIters}};
  j["wrong"] = t.wrong < 0 ? json(nullptr) : json(t.wrong);
  if (!t.roundsUs.empty()) j["rounds_us"] = t.roundsUs;
  return j;
}

json configJson(const RunInfo& info) {
  const Options& o = info.options;
  json ops = json::array();
  for (BenchOp op : o.ops) ops.push_back(toString(op));
  return {{"world_size", info.worldSize},
          {"links", info.links},
          {"bootstrap", info.source},
          {"datatype", toString(o.type)},
          {"op", toString(o.op)},
          {"root", o.root},
          {"ops", ops},
          {"minbytes", o.minBytes},
          {"maxbytes", o.maxBytes},
          {"stepfactor", o.stepFactor},
          {"iters", o.iters},
          {"min_time_ms", o.minTimeMs},
          {"warmup", o.warmup},
          {"warmup_ms", o.warmupMs},
          {"rounds", o.rounds},
          {"algorithms", info.algorithms},
          {"check", o.check},
          {"inplace", o.inPlace},
          {"async", o.async},
          {"vs_mpi", o.vsMpi},
          {"vs_algos", o.vsAlgos},
          {"cost_model", model::costModelJson<json>(info.model)},
          {"mpi_library", info.mpiLibrary},
          {"device", o.cuda ? "cuda" : "host"},
          {"device_info", info.device}};
}

std::ofstream openOutput(const std::string& path) {
  std::ofstream out(path, std::ios::trunc);
  if (!out) {
    throw IoError(fmt::format("cannot write results to '{}': {}", path, std::strerror(errno)));
  }
  return out;
}

void finish(std::ofstream& out, const std::string& path) {
  out.flush();
  if (!out) throw IoError(fmt::format("writing results to '{}' failed", path));
}

std::string csvTiming(const std::optional<Timing>& t) {
  if (!t) return ",,,";
  return fmt::format("{:.3f},{:.4f},{:.4f},{}", t->timeUs, t->algbwGBs, t->busbwGBs,
                     t->wrong < 0 ? std::string() : fmt::format("{}", t->wrong));
}

}  // namespace

void writeJson(const std::string& path, const RunInfo& info, const std::vector<Row>& rows) {
  json results = json::array();
  for (const Row& row : rows) {
    json r = {{"op", toString(row.op)},
              {"size", row.bytes},
              {"count", row.count},
              {"type", toString(row.type)},
              {"redop", row.redop ? json(toString(*row.redop)) : json(nullptr)},
              {"root", row.root},
              {"algorithm", row.algorithm},
              {"algorithm_forced", row.algorithmForced},
              {"world_size", info.worldSize},
              {"out_of_place", timingJson(row.outOfPlace)}};
    if (row.inPlace) r["in_place"] = timingJson(*row.inPlace);
    if (row.copyGBs) {
      r["copy_gbs"] = *row.copyGBs;
      r["busbw_over_copy"] = *row.copyGBs > 0 ? row.outOfPlace.busbwGBs / *row.copyGBs : 0.0;
    }
    if (info.options.vsMpi) {
      if (row.mpi) {
        r["mpi"] = timingJson(*row.mpi);
        r["ratio"] = row.outOfPlace.timeUs > 0 ? row.mpi->timeUs / row.outOfPlace.timeUs : 0.0;
      } else {
        r["mpi"] = nullptr;
        r["mpi_note"] = row.mpiNote;
      }
    }
    if (!row.algos.empty()) {
      json algos = json::object();
      for (const AlgoTiming& a : row.algos) algos[a.name] = timingJson(a.timing);
      r["algos"] = std::move(algos);
      const std::optional<double> pick = pickOverBest(row);
      r["pick_over_best"] = pick ? json(*pick) : json(nullptr);
      r["best_algorithm"] = bestAlgo(row)->name;
    }
    results.push_back(std::move(r));
  }
  json doc = {{"tool", "ringlet-bench"},
              {"version", ringlet::version()},
              {"config", configJson(info)},
              {"results", results},
              {"total_wrong", totalWrong(rows)}};
  std::ofstream out = openOutput(path);
  out << doc.dump(2) << '\n';
  finish(out, path);
}

void writeCsv(const std::string& path, const RunInfo& info, const std::vector<Row>& rows) {
  std::ofstream out = openOutput(path);
  out << "op,size,count,type,redop,root,world_size,"
         "time_us,algbw_gbs,busbw_gbs,wrong,"
         "inplace_time_us,inplace_algbw_gbs,inplace_busbw_gbs,inplace_wrong,"
         "mpi_time_us,mpi_algbw_gbs,mpi_busbw_gbs,mpi_wrong,ratio,copy_gbs,"
         "algorithm,iters,warmup_iters,busbw_over_copy,algorithm_forced,algos_time_us\n";
  for (const Row& row : rows) {
    std::string ratio;
    if (row.mpi && row.outOfPlace.timeUs > 0) {
      ratio = fmt::format("{:.4f}", row.mpi->timeUs / row.outOfPlace.timeUs);
    }
    const std::string copy = row.copyGBs ? fmt::format("{:.4f}", *row.copyGBs) : std::string();
    const std::string overCopy = row.copyGBs && *row.copyGBs > 0
                                     ? fmt::format("{:.4f}", row.outOfPlace.busbwGBs / *row.copyGBs)
                                     : std::string();
    // --vs-algos: "name=time;name=time" (no commas: one CSV field).
    std::string algos;
    for (const AlgoTiming& a : row.algos) {
      algos += fmt::format("{}{}={:.3f}", algos.empty() ? "" : ";", a.name, a.timing.timeUs);
    }
    out << fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", toString(row.op),
                       row.bytes, row.count, toString(row.type),
                       row.redop ? toString(*row.redop) : std::string_view("none"), row.root,
                       info.worldSize, csvTiming(row.outOfPlace), csvTiming(row.inPlace),
                       csvTiming(row.mpi), ratio, copy, row.algorithm, row.outOfPlace.iters,
                       row.outOfPlace.warmupIters, overCopy, row.algorithmForced ? 1 : 0, algos);
  }
  finish(out, path);
}

}  // namespace ringlet::bench
