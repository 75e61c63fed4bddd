#pragma once

#include "compiler/ir.hpp"

#include <string>

namespace gradd::compiler {

/// The graph in Graphviz DOT: one box per op (kind, target, node), one edge
/// per value from the op defining it to each op using it. Render with
/// `dot -Tpng`.
std::string to_dot(const graph& g);

} // namespace gradd::compiler
