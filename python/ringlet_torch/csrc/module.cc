// The Python module ringlet_torch._C: the process group class and ringlet's version.
#include <pybind11/chrono.h>
#include <pybind11/pybind11.h>
#include <torch/csrc/utils/pybind.h>

#include "process_group.h"
#include "ringlet/version.h"

namespace py = pybind11;
using ringlet::torch_backend::ProcessGroupRinglet;

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "ringlet as a torch.distributed process-group backend";
  // The base class must be registered before a subclass is bound.
  py::module::import("torch.distributed");

  py::class_<ProcessGroupRinglet, ringlet::torch_backend::GroupBase,
             c10::intrusive_ptr<ProcessGroupRinglet>>(
      m, "ProcessGroupRinglet",
      "A process group (PyTorch 2: a group's backend) whose collectives run on ringlet. Made by "
      "torch.distributed.init_process_group(backend='ringlet') or new_group(backend='ringlet'); "
      "ringlet_torch.backend_of(group) returns a group's.")
      .def(py::init([](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                       std::chrono::milliseconds timeout, const std::string& groupName,
                       const std::string& storeDescription) {
             return c10::make_intrusive<ProcessGroupRinglet>(store, rank, size, timeout, groupName,
                                                             storeDescription);
           }),
           py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
           py::arg("group_name") = "default", py::arg("store_description") = "torch store",
           py::call_guard<py::gil_scoped_release>())
      .def("describe_links", &ProcessGroupRinglet::describeLinks,
           "Which transport each peer link uses, e.g. '1:shm, 2:tcp'.")
      .def("algorithm_for", &ProcessGroupRinglet::algorithmFor, py::arg("collective"),
           py::arg("bytes"), "The algorithm a call of `collective` over `bytes` would use.")
      .def("shutdown", &ProcessGroupRinglet::shutdown,
           "Runs what is queued, then stops the group's thread.",
           py::call_guard<py::gil_scoped_release>());

  m.def("version", [] { return ringlet::version(); });
  m.def(
      "_shutdown_all", [] { ProcessGroupRinglet::shutdownAll(); },
      "Runs what every live group has queued and stops its threads (the exit handler).",
      py::call_guard<py::gil_scoped_release>());
}
