// The pass manager: parsing a pipeline, running it with verification and
// dumps between passes.

#include "compiler/pass_manager.hpp"

#include "compiler/dot.hpp"

#include <fstream>
#include <sstream>
#include <stdexcept>

namespace gradd::compiler {

namespace {

bool has_unique_op_ids(const graph& g) {
  std::vector<bool> seen(g.ops.size(), false);
  for (const auto& o : g.ops) {
    if (o.id >= seen.size() || seen[o.id])
      return false;
    seen[o.id] = true;
  }
  return true;
}

} // namespace

pass_manager::pass_manager(const std::string& pipeline) {
  auto text = pipeline == "default" ? default_pipeline() : pipeline;
  std::stringstream in(text);
  std::string name;
  while (std::getline(in, name, ',')) {
    if (name == "default") {
      for (auto& p : pass_manager(default_pipeline()).passes_)
        passes_.push_back(std::move(p));
      continue;
    }
    if (!name.empty())
      passes_.push_back(find_pass(name).make());
  }
}

void pass_manager::run(graph& g, const std::string& dump_prefix,
                       const std::function<void()>& checkpoint) {
  // Passes find the ops they move by id. Ids given earlier are kept: others
  // (functional replay) look ops up by them.
  if (!has_unique_op_ids(g))
    g.number_ops();
  analysis_manager analyses(g);
  dump(g, dump_prefix, 0, "capture");
  for (size_t i = 0; i < passes_.size(); ++i) {
    if (checkpoint)
      checkpoint();
    auto& p = *passes_[i];
    if (p.run(g, analyses))
      analyses.invalidate();
    std::ostringstream why;
    if (verify(g, &why))
      throw std::invalid_argument(std::string("pass ") + p.name() + " broke the graph: " + why.str());
    dump(g, dump_prefix, i + 1, p.name());
  }
}

std::string pass_manager::pipeline() const {
  std::string text;
  for (const auto& p : passes_)
    text += (text.empty() ? "" : ",") + std::string(p->name());
  return text;
}

std::vector<std::string> pass_manager::statistics() const {
  std::vector<std::string> lines;
  for (const auto& p : passes_)
    if (!p->statistic().empty())
      lines.push_back(std::string(p->name()) + ": " + p->statistic());
  return lines;
}

void pass_manager::dump(const graph& g, const std::string& prefix, size_t step,
                        const char* name) const {
  if (dump_folder_.empty())
    return;
  // The folder was made when the settings were enabled (check_usable).
  auto base = dump_folder_ + "/" + prefix + "." + std::to_string(step) + "." + name;
  std::ofstream(base + ".txt") << g;
  std::ofstream(base + ".dot") << to_dot(g);
}

} // namespace gradd::compiler
