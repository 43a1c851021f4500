#pragma once
// What this host looks like: packages, NUMA nodes, cores, hardware threads (PUs), caches and
// GPUs, from hwloc when ringlet is built with it, else a smaller picture from the kernel's view
// (every CPU this process may run on counts as one core). Used by ringlet-info to describe the
// host and by ringlet-run to bind ranks to cores.

#include <cstdint>
#include <string>
#include <vector>

namespace ringlet::info {

struct Core {
  int index = 0;         // logical index among the host's cores (hwloc numbering)
  int package = 0;       // logical index of its package (socket)
  int numaNode = -1;     // logical index of its NUMA node; -1 when unknown
  std::vector<int> pus;  // OS indices of its hardware threads, as sched_setaffinity takes them
};

struct NumaNode {
  int index = 0;
  uint64_t memoryBytes = 0;
  std::vector<int> pus;
};

// One cache level and type ("L1d", "L1i", "L2", "L3").
struct CacheLevel {
  std::string name;
  uint64_t bytesEach = 0;  // size of one instance (largest, should they differ)
  int count = 0;           // instances on this host
};

struct Gpu {
  std::string name;      // "cuda0", "nvidia0", "card0", or the PCI vendor:device
  std::string kind;      // "CUDA", "GPU", "PCI display"
  std::string model;     // hwloc's "GPUModel"/"CUDA" info, when known
  std::string pciBusId;  // "0000:65:00.0", when known
};

struct Topology {
  bool fromHwloc = false;  // false: the fallback picture (no hwloc, or hwloc failed)
  std::string note;        // "hwloc 2.9.0", "hwloc: not built in", or why hwloc failed
  int packages = 0;
  int pus = 0;
  std::vector<Core> cores;
  std::vector<NumaNode> numaNodes;
  std::vector<CacheLevel> caches;
  std::vector<Gpu> gpus;
};

// Discovers the whole host (not only the CPUs this process may use). Never throws: when hwloc is
// missing or fails, returns the fallback picture with `note` saying why.
Topology discoverTopology();

// Cores this process may run on, with only their allowed PUs, in core order. Falls back to one
// core per allowed CPU without hwloc. Never empty (at least the CPU this process runs on).
std::vector<Core> usableCores(const Topology& topology);

// "0-3,8,10-11" for sorted or unsorted CPU lists.
std::string cpuListText(std::vector<int> cpus);

}  // namespace ringlet::info
