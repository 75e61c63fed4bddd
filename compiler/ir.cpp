// Text form and verifier of gradd's IR.
//
// The text form prints one op per line as `%r0, %r1 = kind[target](%a0, %a1)`
// (a graph_input's kind in place of the target), followed by the node it
// belongs to and, for call_node, the input metadata.
// The verifier walks the ops once, marking values as defined; a use before
// its definition, a second definition or a missing operand makes the graph
// broken.

#include "compiler/ir.hpp"

#include <ostream>
#include <sstream>

namespace gradd::compiler {

const char* to_string(op_kind kind) noexcept {
  switch (kind) {
    case op_kind::graph_input: return "graph_input";
    case op_kind::call_node: return "call_node";
    case op_kind::validate_outputs: return "validate_outputs";
    case op_kind::accumulate: return "accumulate";
    case op_kind::accumulate_grad: return "accumulate_grad";
    case op_kind::tensor_pre_hook: return "tensor_pre_hook";
    case op_kind::pre_hook: return "pre_hook";
    case op_kind::post_hook: return "post_hook";
    case op_kind::post_acc_grad_hook: return "post_acc_grad_hook";
    case op_kind::copy_slices_prologue: return "copy_slices_prologue";
    case op_kind::copy_slices_epilogue: return "copy_slices_epilogue";
    case op_kind::apply_functional: return "apply_functional";
    case op_kind::unpack: return "unpack";
    case op_kind::final_callbacks: return "final_callbacks";
    case op_kind::output: return "output";
  }
  return "?";
}

const char* to_string(input_kind kind) noexcept {
  switch (kind) {
    case input_kind::tensor: return "tensor";
    case input_kind::size: return "size";
    case input_kind::scalar: return "scalar";
    case input_kind::packed: return "packed";
  }
  return "?";
}

std::string kind_text(const op& o) {
  std::string text = to_string(o.kind);
  std::string what = o.kind == op_kind::graph_input ? to_string(o.input) : o.target;
  if (!what.empty())
    text += "[" + what + "]";
  return text;
}

namespace {

void print_values(std::ostream& out, const std::vector<value_id>& values) {
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0)
      out << ", ";
    if (values[i] == no_value)
      out << "None";
    else
      out << '%' << values[i];
  }
}

void print_meta(std::ostream& out, const tensor_meta& meta) {
  if (!meta.known) {
    out << "None";
    return;
  }
  out << meta.dtype << '[';
  for (size_t i = 0; i < meta.sizes.size(); ++i)
    out << (i > 0 ? ", " : "") << meta.sizes[i];
  out << "]@" << meta.device;
}

/// Number of args and results an op kind requires, -1 where any count goes.
struct arity {
  int args;
  int results;
};

arity arity_of(op_kind kind) {
  switch (kind) {
    case op_kind::graph_input: return {0, 1};
    case op_kind::accumulate: return {2, 1};
    case op_kind::accumulate_grad: return {1, 0};
    case op_kind::post_acc_grad_hook: return {0, 0};
    case op_kind::final_callbacks: return {0, 0};
    case op_kind::output: return {-1, 0};
    default: return {-1, -1};
  }
}

} // namespace

std::ostream& operator<<(std::ostream& out, const graph& g) {
  out << "graph(keep_graph=" << (g.keep_graph ? "true" : "false")
      << ", accumulate_grad=" << (g.accumulate_grad ? "true" : "false")
      << ", nodes=" << g.nodes.size() << ", outputs=" << g.num_outputs << ")\n";
  for (const auto& o : g.ops) {
    out << "  ";
    if (!o.results.empty()) {
      print_values(out, o.results);
      out << " = ";
    }
    out << kind_text(o);
    out << '(';
    print_values(out, o.args);
    out << ')';
    if (o.custom_function)
      out << " custom";
    if (o.index >= 0)
      out << " #" << o.index;
    if (o.node != no_node) {
      out << "  ; node " << o.node;
      if (o.kind == op_kind::call_node && o.node < g.nodes.size()) {
        const auto& n = g.nodes[o.node];
        out << " inputs (";
        for (size_t i = 0; i < n.inputs.size(); ++i) {
          if (i > 0)
            out << ", ";
          print_meta(out, n.inputs[i]);
        }
        out << ')';
      }
    }
    out << '\n';
  }
  return out;
}

bool is_node_level(const graph& g) noexcept {
  for (const auto& o : g.ops)
    if (o.kind == op_kind::call_node)
      return true;
  return false;
}

std::string to_text(const graph& g) {
  std::ostringstream out;
  out << g;
  return out.str();
}

bool verify(const graph& g, std::ostream* why) {
  std::vector<bool> defined(g.num_values, false);
  auto fail = [&](size_t op_index, const std::string& what) {
    if (why) {
      const auto& o = g.ops[op_index];
      *why << "op " << op_index << " (" << kind_text(o) << "): " << what;
    }
    return true;
  };
  // Per value: the op defining it and, for a gradient sum, the op that
  // produced its newest term (Note [Stock engine order]). Terms from one op
  // arrive in edge order, which sums keep too.
  std::vector<int64_t> def(g.num_values, -1);
  std::vector<int64_t> newest_term(g.num_values, -1);
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const auto& o = g.ops[i];
    auto [want_args, want_results] = arity_of(o.kind);
    if (want_args >= 0 && o.args.size() != static_cast<size_t>(want_args))
      return fail(i, "expected " + std::to_string(want_args) + " args, got "
                       + std::to_string(o.args.size()));
    if (want_results >= 0 && o.results.size() != static_cast<size_t>(want_results))
      return fail(i, "expected " + std::to_string(want_results) + " results, got "
                       + std::to_string(o.results.size()));
    if (o.node != no_node && o.node >= g.nodes.size())
      return fail(i, "refers to node " + std::to_string(o.node) + " of "
                       + std::to_string(g.nodes.size()));
    for (auto v : o.args) {
      if (v == no_value)
        continue;
      if (v >= g.num_values)
        return fail(i, "uses %" + std::to_string(v) + ", which does not exist");
      if (!defined[v])
        return fail(i, "uses %" + std::to_string(v) + " before its definition");
    }
    if (is_hook(o.kind) && o.node == no_node)
      return fail(i, "a hook call must name its node");
    if (o.kind == op_kind::accumulate && o.args[0] != no_value && o.args[1] != no_value
        && def[o.args[1]] < newest_term[o.args[0]])
      return fail(i, "adds %" + std::to_string(o.args[1]) + " before a term of %"
                         + std::to_string(o.args[0])
                         + ": the sum no longer adds in the order its terms are produced");
    for (auto v : o.results) {
      if (v == no_value)
        continue;
      if (v >= g.num_values)
        return fail(i, "defines %" + std::to_string(v) + ", which does not exist");
      if (defined[v])
        return fail(i, "defines %" + std::to_string(v) + " a second time");
      defined[v] = true;
      def[v] = static_cast<int64_t>(i);
      newest_term[v] = o.kind == op_kind::accumulate && o.args[1] != no_value
                           ? def[o.args[1]]
                           : static_cast<int64_t>(i);
    }
  }
  return false;
}

} // namespace gradd::compiler
