#include "src/info/topology.h"

#include <fmt/format.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <memory>

#ifdef RINGLET_HAVE_HWLOC
#include <hwloc.h>
#endif

namespace ringlet::info {
namespace {

std::vector<int> allowedCpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
      if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
    }
  }
  if (cpus.empty()) cpus.push_back(std::max(sched_getcpu(), 0));
  return cpus;
}

// Without hwloc: every configured CPU is a core of one unknown package.
Topology fallbackTopology(std::string note) {
  Topology topology;
  topology.note = std::move(note);
  long configured = sysconf(_SC_NPROCESSORS_CONF);
  topology.pus = configured > 0 ? static_cast<int>(configured) : 1;
  for (int cpu = 0; cpu < topology.pus; ++cpu) {
    topology.cores.push_back({cpu, 0, -1, {cpu}});
  }
  return topology;
}

#ifdef RINGLET_HAVE_HWLOC

struct TopologyDeleter {
  void operator()(hwloc_topology* t) const { hwloc_topology_destroy(t); }
};
using TopologyHandle = std::unique_ptr<hwloc_topology, TopologyDeleter>;

std::vector<int> bitmapIndices(hwloc_const_bitmap_t set) {
  std::vector<int> out;
  if (set == nullptr) return out;
  for (int i = hwloc_bitmap_first(set); i >= 0; i = hwloc_bitmap_next(set, i)) out.push_back(i);
  return out;
}

std::string cacheName(hwloc_obj_t obj) {
  std::string name = fmt::format("L{}", obj->attr->cache.depth);
  if (obj->attr->cache.type == HWLOC_OBJ_CACHE_DATA) name += "d";
  if (obj->attr->cache.type == HWLOC_OBJ_CACHE_INSTRUCTION) name += "i";
  return name;
}

std::string pciBusId(hwloc_obj_t obj) {
  for (hwloc_obj_t p = obj; p != nullptr; p = p->parent) {
    if (p->type == HWLOC_OBJ_PCI_DEVICE) {
      const auto& pci = p->attr->pcidev;
      return fmt::format("{:04x}:{:02x}:{:02x}.{:x}", pci.domain, pci.bus, pci.dev, pci.func);
    }
  }
  return "";
}

std::string infoOf(hwloc_obj_t obj, const char* name) {
  const char* value = hwloc_obj_get_info_by_name(obj, name);
  return value != nullptr ? value : "";
}

std::vector<Gpu> findGpus(hwloc_topology_t topo) {
  std::vector<Gpu> gpus;
  for (hwloc_obj_t obj = hwloc_get_next_osdev(topo, nullptr); obj != nullptr;
       obj = hwloc_get_next_osdev(topo, obj)) {
    auto type = obj->attr->osdev.type;
    if (type != HWLOC_OBJ_OSDEV_GPU && type != HWLOC_OBJ_OSDEV_COPROC) continue;
    Gpu gpu;
    gpu.name = obj->name != nullptr ? obj->name : "";
    std::string coproc = infoOf(obj, "CoProcType");
    gpu.kind = !coproc.empty() ? coproc : "GPU";
    gpu.model = infoOf(obj, "GPUModel");
    if (gpu.model.empty()) gpu.model = infoOf(obj, "Backend");
    gpu.pciBusId = pciBusId(obj);
    gpus.push_back(std::move(gpu));
  }
  if (!gpus.empty()) return gpus;
  // No GPU back end in this hwloc (CUDA/NVML/OpenCL plugins): report PCI display controllers.
  for (hwloc_obj_t obj = hwloc_get_next_pcidev(topo, nullptr); obj != nullptr;
       obj = hwloc_get_next_pcidev(topo, obj)) {
    const auto& pci = obj->attr->pcidev;
    if ((pci.class_id >> 8) != 0x03) continue;
    Gpu gpu;
    gpu.name = fmt::format("pci {:04x}:{:04x}", pci.vendor_id, pci.device_id);
    gpu.kind = "PCI display";
    gpu.model = infoOf(obj, "PCIVendor");
    std::string device = infoOf(obj, "PCIDevice");
    if (!device.empty()) gpu.model += (gpu.model.empty() ? "" : " ") + device;
    gpu.pciBusId = pciBusId(obj);
    gpus.push_back(std::move(gpu));
  }
  return gpus;
}

Topology hwlocTopology() {
  hwloc_topology_t raw = nullptr;
  if (hwloc_topology_init(&raw) != 0) return fallbackTopology("hwloc_topology_init failed");
  TopologyHandle topo(raw);
  // Whole machine, not only what this process may use; keep GPUs and NICs.
  hwloc_topology_set_flags(raw, HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED);
  hwloc_topology_set_io_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  hwloc_topology_set_icache_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_ALL);
  if (hwloc_topology_load(raw) != 0) return fallbackTopology("hwloc_topology_load failed");

  Topology topology;
  topology.fromHwloc = true;
  unsigned version = hwloc_get_api_version();
  topology.note =
      fmt::format("hwloc {}.{}.{}", version >> 16, (version >> 8) & 0xff, version & 0xff);
  topology.packages = std::max(hwloc_get_nbobjs_by_type(raw, HWLOC_OBJ_PACKAGE), 1);
  topology.pus = hwloc_get_nbobjs_by_type(raw, HWLOC_OBJ_PU);

  int numaCount = hwloc_get_nbobjs_by_type(raw, HWLOC_OBJ_NUMANODE);
  for (int i = 0; i < numaCount; ++i) {
    hwloc_obj_t node = hwloc_get_obj_by_type(raw, HWLOC_OBJ_NUMANODE, static_cast<unsigned>(i));
    topology.numaNodes.push_back(
        {i, node->attr->numanode.local_memory, bitmapIndices(node->cpuset)});
  }

  int coreCount = hwloc_get_nbobjs_by_type(raw, HWLOC_OBJ_CORE);
  for (int i = 0; i < coreCount; ++i) {
    hwloc_obj_t core = hwloc_get_obj_by_type(raw, HWLOC_OBJ_CORE, static_cast<unsigned>(i));
    Core c;
    c.index = i;
    hwloc_obj_t package = hwloc_get_ancestor_obj_by_type(raw, HWLOC_OBJ_PACKAGE, core);
    c.package = package != nullptr ? static_cast<int>(package->logical_index) : 0;
    for (int n = 0; n < numaCount; ++n) {
      hwloc_obj_t node = hwloc_get_obj_by_type(raw, HWLOC_OBJ_NUMANODE, static_cast<unsigned>(n));
      if (hwloc_bitmap_intersects(core->cpuset, node->cpuset)) {
        c.numaNode = n;
        break;
      }
    }
    c.pus = bitmapIndices(core->cpuset);
    topology.cores.push_back(std::move(c));
  }
  if (topology.cores.empty()) {  // hwloc found no cores (some VMs): one per PU
    for (int i = 0; i < topology.pus; ++i) {
      hwloc_obj_t pu = hwloc_get_obj_by_type(raw, HWLOC_OBJ_PU, static_cast<unsigned>(i));
      topology.cores.push_back({i, 0, -1, {static_cast<int>(pu->os_index)}});
    }
  }

  std::map<std::string, CacheLevel> caches;  // ordered by name: L1d, L1i, L2, L3
  for (hwloc_obj_type_t type : {HWLOC_OBJ_L1CACHE, HWLOC_OBJ_L1ICACHE, HWLOC_OBJ_L2CACHE,
                                HWLOC_OBJ_L3CACHE, HWLOC_OBJ_L4CACHE}) {
    int count = hwloc_get_nbobjs_by_type(raw, type);
    for (int i = 0; i < count; ++i) {
      hwloc_obj_t obj = hwloc_get_obj_by_type(raw, type, static_cast<unsigned>(i));
      CacheLevel& level = caches[cacheName(obj)];
      level.name = cacheName(obj);
      level.bytesEach = std::max<uint64_t>(level.bytesEach, obj->attr->cache.size);
      level.count += 1;
    }
  }
  for (auto& [name, level] : caches) topology.caches.push_back(level);
  topology.gpus = findGpus(raw);
  return topology;
}

#endif  // RINGLET_HAVE_HWLOC

}  // namespace

Topology discoverTopology() {
#ifdef RINGLET_HAVE_HWLOC
  return hwlocTopology();
#else
  return fallbackTopology("hwloc: not built in");
#endif
}

std::vector<Core> usableCores(const Topology& topology) {
  std::vector<int> allowed = allowedCpus();
  std::vector<Core> usable;
  for (const Core& core : topology.cores) {
    Core c = core;
    std::erase_if(c.pus,
                  [&](int pu) { return !std::binary_search(allowed.begin(), allowed.end(), pu); });
    if (!c.pus.empty()) usable.push_back(std::move(c));
  }
  if (usable.empty()) {
    for (size_t i = 0; i < allowed.size(); ++i) {
      usable.push_back({static_cast<int>(i), 0, -1, {allowed[i]}});
    }
  }
  return usable;
}

std::string cpuListText(std::vector<int> cpus) {
  std::sort(cpus.begin(), cpus.end());
  std::string text;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!text.empty()) text += ",";
    text += j == i ? fmt::format("{}", cpus[i]) : fmt::format("{}-{}", cpus[i], cpus[j]);
    i = j + 1;
  }
  return text;
}

}  // namespace ringlet::info
