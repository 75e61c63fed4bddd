// Graphviz output of the IR.

#include "compiler/dot.hpp"

#include <sstream>
#include <vector>

namespace gradd::compiler {

namespace {

/// Node type names are long C++ names; the last component says enough.
std::string short_name(const std::string& name) {
  auto colon = name.rfind("::");
  return colon == std::string::npos ? name : name.substr(colon + 2);
}

const char* color_of(op_kind kind) {
  switch (kind) {
    case op_kind::call_node:
    case op_kind::apply_functional: return "lightblue";
    case op_kind::accumulate_grad: return "palegreen";
    case op_kind::accumulate: return "lightsalmon";
    default: return is_hook(kind) ? "khaki" : "white";
  }
}

} // namespace

std::string to_dot(const graph& g) {
  std::ostringstream out;
  out << "digraph gradd {\n  rankdir=TB;\n  node [shape=box, style=filled, fontname=\"monospace\"];\n";
  std::vector<int64_t> def(g.num_values, -1);
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const auto& o = g.ops[i];
    out << "  op" << i << " [label=\"" << to_string(o.kind);
    if (o.kind == op_kind::graph_input)
      out << "\\n" << to_string(o.input);
    else if (!o.target.empty())
      out << "\\n" << short_name(o.target);
    if (o.node != no_node)
      out << "\\nnode " << o.node;
    out << "\", fillcolor=" << color_of(o.kind) << "];\n";
    for (auto v : o.args)
      if (v != no_value && v < def.size() && def[v] >= 0)
        out << "  op" << def[v] << " -> op" << i << " [label=\"%" << v << "\"];\n";
    for (auto v : o.results)
      if (v != no_value && v < def.size())
        def[v] = static_cast<int64_t>(i);
  }
  out << "}\n";
  return out.str();
}

} // namespace gradd::compiler
