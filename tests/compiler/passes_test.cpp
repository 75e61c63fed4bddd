// Each pass on hand-built graphs (orders before and after as text), the
// pass manager, and the verifier's sum-order rule.

#include "compiler/dot.hpp"
#include "compiler/lower.hpp"
#include "compiler/pass_manager.hpp"

#include <catch2/catch.hpp>

#include <stdlib.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace {

using namespace gradd::compiler;

/// Builds graphs op by op.
struct builder {
  graph g;
  /// Appends an op and returns its results.
  std::vector<value_id> add(op_kind kind, std::string target, uint32_t node,
                            std::vector<value_id> args, size_t results, int64_t index = -1) {
    if (node != no_node && node >= g.nodes.size())
      g.nodes.resize(node + 1);  // the node table: entries the ops can name
    op o{kind, std::move(target), node, index, std::move(args), {}};
    for (size_t i = 0; i < results; ++i)
      o.results.push_back(g.new_value());
    auto out = o.results;
    g.ops.push_back(std::move(o));
    return out;
  }
  value_id input(input_kind what = input_kind::tensor, int64_t index = 0) {
    auto value = add(op_kind::graph_input, "", no_node, {}, 1, index)[0];
    g.ops.back().input = what;
    return value;
  }
};

/// The op order, one "kind[target]@node" per op (kind_text).
std::string order(const graph& g) {
  std::string out;
  for (const auto& o : g.ops) {
    out += kind_text(o);
    if (o.node != no_node)
      out += "@" + std::to_string(o.node);
    out += "\n";
  }
  return out;
}

std::string run_pass(graph& g, const std::string& name) {
  pass_manager pm(name);
  pm.run(g);
  auto stats = pm.statistics();
  return stats.empty() ? "" : stats[0];
}

/// Hooks at the end, as AOTAutograd leaves them: the seed's starting point.
/// Nothing else reads the hooked gradient: a hook does not move past a
/// reader of its tensor (which it might change in place).
graph hooks_at_the_end() {
  builder b;
  auto x = b.input();
  auto a = b.add(op_kind::apply_functional, "MulBackward0", 1, {x}, 1)[0];
  auto c = b.add(op_kind::apply_functional, "ExpBackward0", 2, {x}, 1)[0];
  b.add(op_kind::accumulate_grad, "", 3, {c}, 0);
  b.add(op_kind::apply_functional, "SinBackward0", 4, {x}, 1);
  b.add(op_kind::tensor_pre_hook, "", 2, {a}, 1);
  b.add(op_kind::post_acc_grad_hook, "", 3, {}, 0);
  b.add(op_kind::final_callbacks, "", no_node, {}, 0);
  return b.g;
}

} // namespace

TEST_CASE("reorder_tensor_pre_hook_nodes puts a hook right after its gradient",
          "[compiler][passes]") {
  auto g = hooks_at_the_end();
  CHECK(run_pass(g, "reorder_tensor_pre_hook_nodes") == "reorder_tensor_pre_hook_nodes: moved 1 ops");
  CHECK(order(g) ==
        "graph_input[tensor]\n"
        "apply_functional[MulBackward0]@1\n"
        "tensor_pre_hook@2\n"
        "apply_functional[ExpBackward0]@2\n"
        "accumulate_grad@3\n"
        "apply_functional[SinBackward0]@4\n"
        "post_acc_grad_hook@3\n"
        "final_callbacks\n");
}

TEST_CASE("reorder_post_acc_grad_hook_nodes puts the hook after its accumulation",
          "[compiler][passes]") {
  auto g = hooks_at_the_end();
  run_pass(g, "reorder_post_acc_grad_hook_nodes");
  CHECK(order(g) ==
        "graph_input[tensor]\n"
        "apply_functional[MulBackward0]@1\n"
        "apply_functional[ExpBackward0]@2\n"
        "accumulate_grad@3\n"
        "post_acc_grad_hook@3\n"
        "apply_functional[SinBackward0]@4\n"
        "tensor_pre_hook@2\n"
        "final_callbacks\n");
}

TEST_CASE("pre-hooks go early, then right before their node", "[compiler][passes]") {
  builder b;
  auto x = b.input();
  auto a = b.add(op_kind::apply_functional, "A", 1, {x}, 1)[0];
  b.add(op_kind::apply_functional, "B", 2, {x}, 1);
  auto hooked = b.add(op_kind::pre_hook, "", 3, {a}, 1)[0];
  b.add(op_kind::apply_functional, "C", 4, {x}, 1);
  b.add(op_kind::apply_functional, "D", 3, {hooked}, 1);
  auto g = b.g;
  run_pass(g, "reorder_pre_hook_nodes_to_schedule_asap");
  CHECK(order(g) == "graph_input[tensor]\napply_functional[A]@1\npre_hook@3\n"
                    "apply_functional[B]@2\napply_functional[C]@4\napply_functional[D]@3\n");
  run_pass(g, "reorder_pre_hook_nodes_to_mimic_eager");
  CHECK(order(g) == "graph_input[tensor]\napply_functional[A]@1\napply_functional[B]@2\n"
                    "apply_functional[C]@4\npre_hook@3\napply_functional[D]@3\n");
}

TEST_CASE("reorder_accumulate_grad_nodes accumulates as soon as the gradient exists, after its "
          "other uses",
          "[compiler][passes]") {
  builder b;
  auto x = b.input();
  auto a = b.add(op_kind::apply_functional, "A", 1, {x}, 1)[0];
  b.add(op_kind::apply_functional, "B", 2, {x}, 1);
  b.add(op_kind::accumulate_grad, "", 3, {a}, 0);
  auto g = b.g;
  run_pass(g, "reorder_accumulate_grad_nodes");
  CHECK(order(g) == "graph_input[tensor]\napply_functional[A]@1\naccumulate_grad@3\n"
                    "apply_functional[B]@2\n");
  // An add's backward hands one tensor to both its inputs, one value in a
  // recording: where B reads it too, AccumulateGrad steals it only once B
  // no longer holds it.
  g = b.g;
  g.ops[2].args = {a};
  CHECK(run_pass(g, "reorder_accumulate_grad_nodes").empty());
  CHECK(order(g) == "graph_input[tensor]\napply_functional[A]@1\napply_functional[B]@2\n"
                    "accumulate_grad@3\n");
}

TEST_CASE("a pre-hook stays before its gradient's other uses", "[compiler][passes]") {
  // The hook may change its gradient in place, which B reads too.
  builder b;
  auto x = b.input();
  auto both = b.add(op_kind::apply_functional, "AddBackward0", 1, {x}, 1)[0];
  auto hooked = b.add(op_kind::pre_hook, "", 3, {both}, 1)[0];
  b.add(op_kind::apply_functional, "B", 2, {both}, 1);
  b.add(op_kind::apply_functional, "D", 3, {hooked}, 1);
  auto g = b.g;
  CHECK(run_pass(g, "reorder_pre_hook_nodes_to_mimic_eager").empty());
  g.ops[3].args = {x};  // B reads another gradient: the hook goes right before D
  run_pass(g, "reorder_pre_hook_nodes_to_mimic_eager");
  CHECK(order(g) == "graph_input[tensor]\napply_functional[AddBackward0]@1\n"
                    "apply_functional[B]@2\npre_hook@3\napply_functional[D]@3\n");
}

TEST_CASE("delay_unpack_hook_nodes unpacks right before the first use", "[compiler][passes]") {
  builder b;
  auto x = b.input();
  auto saved = b.input(input_kind::packed);
  auto unpacked = b.add(op_kind::unpack, "", 1, {saved}, 1)[0];
  b.add(op_kind::apply_functional, "A", 2, {x}, 1);
  b.add(op_kind::apply_functional, "B", 1, {unpacked}, 1);
  auto g = b.g;
  run_pass(g, "delay_unpack_hook_nodes");
  CHECK(order(g) == "graph_input[tensor]\ngraph_input[packed]\napply_functional[A]@2\nunpack@1\n"
                    "apply_functional[B]@1\n");
}

TEST_CASE("reorder_post_hook_nodes moves output-less post hooks after the last use",
          "[compiler][passes]") {
  builder b;
  auto x = b.input();
  auto a = b.add(op_kind::apply_functional, "A", 1, {x}, 1)[0];
  b.add(op_kind::post_hook, "", 2, {a}, 0, /*outputs=*/0);
  b.add(op_kind::accumulate_grad, "", 2, {a}, 0);
  b.add(op_kind::post_acc_grad_hook, "", 2, {}, 0);
  auto g = b.g;
  run_pass(g, "reorder_post_hook_nodes");
  CHECK(order(g) == "graph_input[tensor]\napply_functional[A]@1\naccumulate_grad@2\n"
                    "post_acc_grad_hook@2\npost_hook@2\n");
}

TEST_CASE("dce drops unused pure ops and never an impure one", "[compiler][passes]") {
  builder b;
  auto x = b.input();
  auto unused_size = b.input(input_kind::size, 0);
  (void)unused_size;
  auto a = b.add(op_kind::apply_functional, "A", 1, {x}, 1)[0];
  auto dead = b.add(op_kind::apply_functional, "Dead", 2, {a}, 1)[0];
  b.add(op_kind::accumulate, "", 3, {dead, a}, 1);                  // pure, unused
  b.add(op_kind::call_node, "SideEffect", 4, {a}, 1);               // impure
  b.add(op_kind::tensor_pre_hook, "", 5, {a}, 1);                    // impure
  b.add(op_kind::accumulate_grad, "", 6, {a}, 0);                    // impure
  b.add(op_kind::final_callbacks, "", no_node, {}, 0);               // impure
  auto g = b.g;
  CHECK(run_pass(g, "dce") == "dce: removed 2 ops");
  CHECK(order(g) == "graph_input[tensor]\ngraph_input[size]\napply_functional[A]@1\n"
                    "call_node[SideEffect]@4\ntensor_pre_hook@5\naccumulate_grad@6\n"
                    "final_callbacks\n");
  CHECK(run_pass(g, "remove_unused_sizes") == "remove_unused_sizes: removed 1 size inputs, kept 0");
  CHECK(order(g) == "graph_input[tensor]\napply_functional[A]@1\ncall_node[SideEffect]@4\n"
                    "tensor_pre_hook@5\naccumulate_grad@6\nfinal_callbacks\n");
}

TEST_CASE("remove_unused_sizes keeps each used size at its lifted position",
          "[compiler][passes]") {
  builder b;
  auto x = b.input();
  b.input(input_kind::size, 0);
  auto used = b.input(input_kind::size, 1);
  b.input(input_kind::scalar, 0);  // unused, but not a size
  b.add(op_kind::apply_functional, "ViewBackward0", 1, {x, used}, 1);
  auto g = b.g;
  CHECK(run_pass(g, "remove_unused_sizes") == "remove_unused_sizes: removed 1 size inputs, kept 1");
  CHECK(order(g) == "graph_input[tensor]\ngraph_input[size]\ngraph_input[scalar]\n"
                    "apply_functional[ViewBackward0]@1\n");
  CHECK(g.ops[1].index == 1);
  CHECK(run_pass(g, "remove_unused_sizes").empty());
}

TEST_CASE("move_graph_nodes_to_cuda moves CPU scalars of built-in ops only", "[compiler][passes]") {
  builder b;
  auto x = b.input();
  b.g.ops.back().meta = {{4}, "float", "cuda:0", true};
  auto cpu_scalar = [&](int64_t index) {
    auto value = b.input(input_kind::tensor, index);
    b.g.ops.back().meta = {{}, "float", "cpu", true};
    return value;
  };
  auto scalar = cpu_scalar(1);
  auto custom_scalar = cpu_scalar(2);
  auto node_scalar = cpu_scalar(3);
  b.add(op_kind::apply_functional, "MulBackward0", 1, {x, scalar}, 1);
  // A custom function's functional is named after its type (`typeid`).
  b.add(op_kind::apply_functional, "6my_fn", 2, {custom_scalar}, 1);
  b.g.ops.back().custom_function = true;
  b.add(op_kind::call_node, "torch::autograd::generated::MulBackward0", 3, {node_scalar}, 1);
  auto g = b.g;
  CHECK(run_pass(g, "move_graph_nodes_to_cuda") == "move_graph_nodes_to_cuda: moved 1 inputs to cuda:0");
  CHECK(g.ops[1].meta.device == "cuda:0");
  CHECK(g.ops[2].meta.device == "cpu");
  CHECK(g.ops[3].meta.device == "cpu");
  g.ops[0].meta.device = "cpu";  // no CUDA input: nothing moves
  g.ops[1].meta.device = "cpu";
  CHECK(run_pass(g, "move_graph_nodes_to_cuda").empty());
}

TEST_CASE("the verifier rejects a sum whose terms come out of order", "[compiler][passes]") {
  builder b;
  auto x = b.input();
  auto first = b.add(op_kind::apply_functional, "A", 1, {x}, 1)[0];
  auto second = b.add(op_kind::apply_functional, "B", 2, {x}, 1)[0];
  b.add(op_kind::accumulate, "", 3, {first, second}, 1);
  CHECK(!verify(b.g));
  std::swap(b.g.ops[1], b.g.ops[2]);  // B now runs first, but the sum adds A first
  std::ostringstream why;
  REQUIRE(verify(b.g, &why));
  CHECK(why.str() == "op 3 (accumulate): adds %3 before a term of %2: the sum no longer adds "
                     "in the order its terms are produced");
}

TEST_CASE("gradient_ready_schedule runs gradient paths first, sums unchanged",
          "[compiler][passes]") {
  // root -> A -> {X -> X2 -> acc(w1), F -> acc(w0)}. The stock engine runs X
  // first (higher sequence number), then F and acc(w0), then X2 and acc(w1).
  // X leads only to the later gradient, so F and acc(w0) can go first.
  graph g;
  auto node = [](const char* name, uint64_t seq, std::vector<edge_ref> edges, bool acc = false) {
    node_info n;
    n.type_name = name;
    n.sequence_nr = seq;
    n.edges = std::move(edges);
    n.inputs.resize(1);
    n.is_accumulate_grad = acc;
    return n;
  };
  g.nodes = {node("GraphRoot", 100, {{1, 0}}), node("A", 50, {{2, 0}, {4, 0}}),
             node("X", 45, {{3, 0}}), node("X2", 10, {{6, 0}}), node("F", 20, {{5, 0}}),
             node("AccumulateGrad", UINT64_MAX, {}, true), node("AccumulateGrad", UINT64_MAX, {}, true)};
  g.nodes[0].is_root = true;
  g.nodes[0].inputs.clear();
  lower_to_node_ops(g);
  auto calls = [](const graph& h) {
    std::string out;
    for (const auto& o : h.ops)
      if (o.kind == op_kind::call_node || o.kind == op_kind::accumulate_grad)
        out += (o.kind == op_kind::call_node ? o.target : "acc" + std::to_string(o.node)) + " ";
    return out;
  };
  CHECK(calls(g) == "GraphRoot A X F acc5 X2 acc6 ");
  CHECK(run_pass(g, "gradient_ready_schedule") == "gradient_ready_schedule: moved 3 node blocks");
  CHECK(!verify(g));
  CHECK(calls(g) == "GraphRoot A F acc5 X X2 acc6 ");
}

TEST_CASE("pipelines print back as parsed; unknown names list the known ones",
          "[compiler][passes]") {
  pass_manager all("default");
  CHECK(all.pipeline() == default_pipeline());
  CHECK(pass_manager("dce,remove_unused_sizes").pipeline() == "dce,remove_unused_sizes");
  CHECK(pass_manager("default,gradient_ready_schedule").pipeline()
        == default_pipeline() + ",gradient_ready_schedule");
  CHECK_THROWS_WITH(pass_manager("dce,fuse_everything"),
                    Catch::Contains("unknown pass 'fuse_everything' (known: delay_unpack_hook_nodes"));
}

TEST_CASE("the default pipeline leaves lowered node-level IR in stock order", "[compiler][passes]") {
  graph g;
  node_info root;
  root.type_name = "GraphRoot";
  root.is_root = true;
  root.edges = {{1, 0}};
  node_info mul;
  mul.type_name = "MulBackward0";
  mul.sequence_nr = 3;
  mul.inputs.resize(1);
  mul.hooks.tensor_pre = 1;
  mul.hooks.pre = 1;
  mul.hooks.post = 1;
  g.nodes = {root, mul};
  lower_to_node_ops(g);
  auto lowered = order(g);
  pass_manager("default").run(g);
  CHECK(order(g) == lowered);
  CHECK_THAT(to_dot(g), Catch::Contains("op0 -> op1"));
}

TEST_CASE("the pass manager dumps text and DOT after capture and after each pass",
          "[compiler][passes]") {
  char folder[] = "/tmp/gradd-ir-dump-XXXXXX";
  REQUIRE(::mkdtemp(folder) != nullptr);
  auto g = hooks_at_the_end();
  pass_manager pm("reorder_tensor_pre_hook_nodes,dce");
  pm.dump_to(folder);
  pm.run(g, "graph_7");
  auto read = [&](const std::string& name) {
    std::ifstream in(std::string(folder) + "/" + name);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  };
  for (const char* step : {"0.capture", "1.reorder_tensor_pre_hook_nodes", "2.dce"}) {
    INFO("step " << step);
    CHECK_THAT(read(std::string("graph_7.") + step + ".txt"), Catch::Contains("tensor_pre_hook"));
    CHECK_THAT(read(std::string("graph_7.") + step + ".dot"), Catch::StartsWith("digraph gradd"));
  }
  CHECK(read("graph_7.2.dce.txt") == to_text(g));
  std::system((std::string("rm -rf ") + folder).c_str());
}
