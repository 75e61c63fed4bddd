#pragma once

#include "compiler/pass.hpp"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace gradd::compiler {

/// Runs a pipeline of passes over a graph. The pipeline is text: pass
/// names separated by commas ("default" stands for default_pipeline()), and
/// pipeline() prints it back the same way.
///
/// Per pass, as MLIR's pass manager: run, drop analyses if it changed the
/// graph, verify, dump the IR (text and DOT) when a dump folder is set.
class pass_manager {
public:
  /// Builds the pipeline; throws std::invalid_argument for an unknown name,
  /// listing the known ones.
  explicit pass_manager(const std::string& pipeline);

  /// Writes `<prefix>.<step>.<pass>.txt` and `.dot` after each pass (and
  /// `<prefix>.0.capture.*` before the first) into `folder`, which must
  /// exist (enabling settings makes logging.ir_dump_dir); "" turns it off.
  void dump_to(std::string folder) { dump_folder_ = std::move(folder); }

  /// Runs the passes over `g`, calling `checkpoint` (when set) before each
  /// one: a caller stops a long pipeline by throwing from it. Throws
  /// std::invalid_argument naming the pass and the op when a pass leaves the
  /// graph broken.
  void run(graph& g, const std::string& dump_prefix = "graph",
           const std::function<void()>& checkpoint = {});

  /// The pipeline as text, e.g. "dce,remove_unused_sizes".
  std::string pipeline() const;

  /// What each pass of the last run did, one line each ("dce: removed 3 ops").
  std::vector<std::string> statistics() const;

private:
  void dump(const graph& g, const std::string& prefix, size_t step, const char* name) const;

  std::vector<std::unique_ptr<pass>> passes_;
  std::string dump_folder_;
};

} // namespace gradd::compiler
