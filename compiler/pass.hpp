#pragma once

#include "compiler/analysis.hpp"
#include "compiler/ir.hpp"

#include <memory>
#include <string>
#include <vector>

namespace gradd::compiler {

/// A graph transformation with a name. The name is also its file name, its
/// token in a pipeline, its YAML name and the suffix of its IR dump.
class pass {
public:
  virtual ~pass() = default;

  /// The pass's name, e.g. "dce".
  virtual const char* name() const noexcept = 0;

  /// Transforms `g`; returns whether anything changed. On a graph the pass
  /// cannot handle it throws std::invalid_argument naming the op at fault.
  virtual bool run(graph& g, analysis_manager& analyses) = 0;

  /// What the last run did, e.g. "removed 3 ops" (empty if nothing).
  const std::string& statistic() const noexcept { return statistic_; }

protected:
  /// Sets the statistic to "moved <count> <what>", or clears it for 0.
  void count_moved(size_t count, const std::string& what = "ops") {
    statistic_ = count > 0 ? "moved " + std::to_string(count) + " " + what : "";
  }

  std::string statistic_;
};

/// One row of the pass table: a name, what the pass does, and its maker.
struct pass_info {
  const char* name;
  const char* summary;
  std::unique_ptr<pass> (*make)();
};

/// Every pass gradd has, in the default pipeline's order (the seed's
/// end_capture order), then the ones not in it by default.
const std::vector<pass_info>& pass_table();

/// The names of the default pipeline, comma-separated.
std::string default_pipeline();

/// Finds a pass by name, in pass_table() and among the registered ones;
/// throws std::invalid_argument listing the known names if there is none.
const pass_info& find_pass(const std::string& name);

/// Adds a pass of the program's own that pipelines may then name
/// (`passes.pipeline`). `info.name` and `info.summary` must outlive the
/// process (string literals). Thread-safe; throws std::invalid_argument if
/// the name is taken. Registered passes cannot be removed.
void register_pass(const pass_info& info);

} // namespace gradd::compiler
