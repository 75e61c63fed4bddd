// gradd._native: the C++ API of gradd/gradd.hpp for Python processes.
//
// Every call that may wait (enable, disable, scopes, reset, waiting for
// compiles) lets go of the GIL first: gradd's own threads never need it, but
// a backward on another Python thread may be holding a node that does.

#include "gradd/gradd.hpp"
#include "gradd/interpreter.hpp"

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <optional>
#include <string>

namespace py = pybind11;

namespace {

py::dict to_dict(const gradd::statistics& s) {
  py::dict d;
  for (const auto& [name, value] : gradd::fields(s))
    if (name.rfind("eager.", 0) != 0)  // by reason, below, every reason
      d[py::str(name)] = value;
  py::dict by_reason;
  for (size_t i = 0; i < gradd::fallback_reason_count; ++i)
    by_reason[gradd::to_string(static_cast<gradd::fallback_reason>(i))] = s.eager_by_reason[i];
  d["eager_by_reason"] = by_reason;
  return d;
}

py::dict to_dict(const gradd::graph_statistics& g) {
  py::dict d;
  d["id"] = g.id;
  d["state"] = to_string(g.state);
  d["nodes"] = g.nodes;
  d["hits"] = g.hits;
  d["pending_backwards"] = g.pending_backwards;
  d["eager_backwards"] = g.eager_backwards;
  d["compiles"] = g.compiles;
  d["compile_ms"] = g.compile_ms;
  d["fallback"] = g.fallback ? py::object(py::str(to_string(*g.fallback))) : py::none();
  d["cuda_graphs"] = g.cuda_graphs;
  d["graph_backwards"] = g.graph_backwards;
  d["live_nodes"] = g.live_nodes;
  d["graph_pieces"] = g.graph_pieces;
  d["cuts"] = g.cuts;
  d["graph_kernels"] = g.graph_kernels;
  d["plans_only"] = g.plans_only;
  return d;
}

/// A scope gradd's guards open, closed explicitly: Python's `with` ends it
/// at a known point, not whenever the object is collected.
template <class Guard>
class scope {
public:
  template <class... Args>
  explicit scope(Args&&... args) {
    py::gil_scoped_release released;
    guard_.emplace(std::forward<Args>(args)...);
  }
  void close() {
    py::gil_scoped_release released;
    guard_.reset();
  }

private:
  std::optional<Guard> guard_;
};

gradd::settings settings_from(const std::optional<std::string>& config) {
  return config ? gradd::load_settings(*config) : gradd::default_settings();
}

} // namespace

PYBIND11_MODULE(_native, m) {
  m.doc() = "gradd's C++ engine (gradd/gradd.hpp); use the `gradd` package.";
  py::register_exception<gradd::config_error>(m, "config_error", PyExc_ValueError);

  m.def("enable", [](const std::optional<std::string>& config) {
    auto settings = settings_from(config);
    py::gil_scoped_release released;
    gradd::enable(settings);
  }, py::arg("config") = py::none());
  m.def("disable", [] {
    py::gil_scoped_release released;
    gradd::disable();
  });
  m.def("is_enabled", &gradd::is_enabled);
  m.def("reset", [] {
    py::gil_scoped_release released;
    gradd::reset();
  });
  m.def("stats", [] { return to_dict(gradd::stats()); });
  m.def("graph_stats", [] {
    py::list out;
    for (const auto& g : gradd::graph_stats())
      out.append(to_dict(g));
    return out;
  });
  m.def("wait_for_compiles", [](double timeout_s) {
    py::gil_scoped_release released;
    return gradd::wait_for_compiles(std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000)));
  }, py::arg("timeout_s") = 30.0);

  // PyTorch's Python engine stays the default one: Python backwards take
  // gradd's gate here (gradd/interpreter.hpp).
  m.def("enter_gate", [] {
    py::gil_scoped_release released;  // its holder may need the GIL to get to the hook
    return gradd::enter_backward_gate();
  });
  m.def("leave_gate", &gradd::leave_backward_gate);

  m.def("synchronize_device", [] {
    py::gil_scoped_release released;  // a capture may run a Python node
    gradd::synchronize_device();
  });

  py::class_<scope<gradd::enable_guard>>(m, "EnableScope")
      .def(py::init([](const std::optional<std::string>& config) {
             return new scope<gradd::enable_guard>(settings_from(config));
           }),
           py::arg("config") = py::none())
      .def("close", &scope<gradd::enable_guard>::close);
  py::class_<scope<gradd::disable_guard>>(m, "DisableScope")
      .def(py::init([] { return new scope<gradd::disable_guard>(); }))
      .def("close", &scope<gradd::disable_guard>::close);
}
