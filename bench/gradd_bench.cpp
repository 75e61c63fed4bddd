// gradd-bench: times backwards of a model on the stock engine and under
// gradd and prints one JSON line.
//
//   gradd-bench --model {mlp,deep-mlp,convnet,lstm,transformer,wide-mlp,encoder,resnet18}
//               --device {cpu,cuda} --mode {eager,gradd,both}
//               --iters N --warmup W [--config FILE] [--structures {fixed,sweep}]
//               [--shapes {fixed,sweep}] [--dump-ir DIR] [--grad-ready-times]
//               [--trace FILE] [--deterministic] [--step-times] [--create-graph]
//               [--help]
//
// A flag takes its value as the next argument or after '=', and may be
// given once; anything else is refused with the usage and exit code 2, as is
// a bad policy (--config, or $GRADD_CONFIG without it).
//
// Each iteration runs a fresh forward pass and times only its backward (CUDA
// synchronized on both sides). `--mode both` interleaves the engines
// iteration by iteration in one process, taking turns at going first, so
// both see the same machine state, and reports gradd's median over the
// stock engine's as `ratio`.
// `max_rel_grad_diff` compares gradd's gradients with the stock engine's on
// the same inputs: max |g - g_stock| / max |g_stock| over all parameters;
// `stock_rel_grad_diff` the stock engine's second run with its first, which
// cuDNN's convolution backward does not repeat bit for bit unless
// `--deterministic` turns its deterministic algorithms on, for the whole
// run (both engines, gradd's captures and the floor).
// `--structures sweep` makes an MLP change depth every step (4 structures) and
// adds `stall_ratio`: gradd's slowest backward over the stock engine's slowest,
// warm-up included, since that is where new structures appear; `--shapes
// sweep` changes the batch size every step among 4 sizes (any model; one
// structure, new shapes) and adds `stall_ratio` too, with gradd's slowest
// backward (`slowest_ms`), its step (warm-up steps first, from 0) and the
// CUDA graphs captured by its end (`captures_by_slowest`), and the stock
// engine's slowest (`eager_slowest_ms`). `--mode both`
// also measures `peak_ratio`: gradd's peak memory during a backward, plus
// what its CUDA graphs hold (`graph_mb`), over the stock engine's; each peak
// is above what its backward's start held (`peak_mb`, `eager_peak_mb`; CUDA
// allocator statistics; on the CPU a counting allocator, installed only for
// that phase, after the timing), and `eager_working_set_mb` is the stock
// engine's with its saved tensors kept to the end (retain_graph), so that
// no gradient lands in the memory of an activation it has read, as none
// in a CUDA graph's pool does. On CUDA, `--mode both` also measures the
// whole training step (forward, backward, an Adam step with lr 0):
// `step_peak_ratio` and `step_reserved_ratio`, gradd's `max_memory_allocated`
// and `max_memory_reserved` over the stock engine's (`step_peak_mb`,
// `eager_step_peak_mb`, `step_reserved_mb`, `eager_step_reserved_mb`), the
// stock engine's measured before gradd holds any graph, gradd's once the
// graphs of a first, unmeasured round of the same steps are captured;
// `step_graph_backwards` counts the measured steps a graph served.
// `--grad-ready-times` adds when the first and the median parameter
// gradient were accumulated, in ms after the backward started, for both
// engines. `--dump-ir DIR` writes each graph's IR (text and DOT) after
// capture and after each pass. On CUDA,
// `--mode both` adds `floor_ms`, the stock engine's backward kernels replayed
// from one CUDA graph (bench/backward_floor.hpp), and `floor_ratio`, gradd's
// median over it; with `--shapes sweep` each batch size has its floor, and
// `floor_ratio` is the median of each timed step's time over its own;
// `floor_launch_us` is the CPU time of the floor graph's launch; a sweep
// adds `rotating_floor_ms` and `rotating_floor_ratio`, the same with the
// shapes' floor graphs replayed in turn, as the sweep runs them. Every run
// reports `returned_ms`, the median time until `backward()` returned (the
// GPU may still run), beside `median_ms`, until its stream was done.
// `--trace FILE` writes a kernel timeline (Chrome trace,
// bench/kernel_trace.hpp) of `traced_steps` more steps after the timed
// ones, each engine's backward in turn, gradd's first;
// bench/trace_summary.py says where each backward's time went.
// `--step-times` adds each timed step's time in order (`step_ms`, gradd's,
// or the stock engine's in `--mode eager`; the first is step `--warmup`,
// whose batch with `--shapes sweep` is the (step mod 4)-th size) and, with
// the floor, each shape's (`shape_floor_ms`, by step mod 4; a sweep's
// `shape_rotating_floor_ms` too): a median hides which shapes are slow.
// `first_ms` is gradd's first backward in the process (a new structure),
// `eager_first_ms` the stock engine's of the same batch right after it;
// `--mode both` also makes the structure new to gradd again (reset) in
// `first_rounds` rounds, the engines taking turns at going first, and
// reports the medians (`first_median_ms`, `eager_first_median_ms`) and
// their ratio (`first_median_ratio`).
// `--memory-snapshot PREFIX` (with the step measurement) records each CUDA
// allocation and free with its C++ stack during each engine's training
// steps and writes the allocator's snapshot after them, to
// PREFIX-stock.pickle and PREFIX-gradd.pickle
// (scripts/memory_snapshot_diff.py says what gradd's peak holds beyond).
// `--create-graph` makes every step a gradient-penalty step: the loss's
// gradients with create_graph=true, then the backward of the loss plus
// their squared norm, both timed as the step's backward (no floor: it is
// the floor of one plain backward).

#include "bench/backward_floor.hpp"
#include "bench/bench_options.hpp"
#include "bench/gradient_diff.hpp"
#include "bench/kernel_trace.hpp"
#include "bench/memory_snapshot.hpp"
#include "bench/peak_memory.hpp"
#include "bench/timed_backward.hpp"
#include "examples/models.hpp"
#include "gradd/gradd.hpp"

#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

namespace {

using namespace gradd::bench;

constexpr int sweep_structures = 4;
constexpr int sweep_batch_sizes = 4;
constexpr int traced_steps = 10;
/// Training steps whose memory is measured, per engine: one sweep of shapes.
constexpr int measured_steps = 4;
/// Untimed stock backwards before anything is timed: the CUDA context,
/// cuBLAS handles, the caching allocator and the stock engine's device
/// thread (cuDNN's plans are cached per thread) warm up here, not in
/// whichever engine happens to go first. One was not enough on a Hopper GPU:
/// convnet's second stock backward in a process took 1.3-1.5 ms, its third
/// 0.8-1.0.
constexpr int stock_warmups = 3;
/// Rounds of `first_median_ms`: a structure made new to gradd again.
constexpr int first_rounds = 5;

struct summary {
  double median = 0;
  double p90 = 0;
};

summary summarize(std::vector<double> times) {
  std::sort(times.begin(), times.end());
  auto at = [&](double q) { return times[static_cast<size_t>(q * (times.size() - 1))]; };
  return {at(0.5), at(0.9)};
}

/// A new structure's first backward, `first_rounds` times on batch `step`:
/// each round drops gradd's plans and graphs (reset), so that the structure
/// is new to it again, and times gradd's first backward and the stock
/// engine's of the same batch, taking turns at going first. Each starts
/// with no compile or capture in flight. Returns the two medians. Call
/// last: reset() zeroes gradd's statistics.
std::pair<double, double> new_structure_firsts(gradd::models::model& model, int64_t step,
                                               const torch::Device& device) {
  std::vector<double> gradd_firsts, stock_firsts;
  for (int r = 0; r < first_rounds; ++r) {
    gradd::wait_for_compiles();
    gradd::reset();
    for (bool with_gradd : {r % 2 == 0, r % 2 != 0}) {
      gradd::wait_for_compiles();
      (with_gradd ? gradd_firsts : stock_firsts)
          .push_back(timed_backward(model, step, with_gradd, device).ms);
    }
  }
  return {summarize(gradd_firsts).median, summarize(stock_firsts).median};
}

/// Prints `, "name": [v, ...]`, milliseconds, into the JSON line.
void print_list(const char* name, const std::vector<double>& values) {
  std::printf(", \"%s\": [", name);
  for (size_t i = 0; i < values.size(); ++i)
    std::printf(i ? ", %.4f" : "%.4f", values[i]);
  std::printf("]");
}

/// Timed steps held to one reading of their floor.
struct floor_reading {
  std::vector<double> of_shape;  ///< each shape's floor, by step mod the shapes
  double ms = 0;                 ///< the median of the steps' floors
  double ratio = 0;              ///< the median of each step's time over its floor
};

/// `times` (steps from `first_step`) held to `of_shape`.
floor_reading held_to(const std::vector<double>& times, int64_t first_step,
                      std::vector<double> of_shape) {
  auto shapes = static_cast<int64_t>(of_shape.size());
  std::vector<double> floors, ratios;
  for (size_t i = 0; i < times.size(); ++i) {
    floors.push_back(of_shape[(first_step + static_cast<int64_t>(i)) % shapes]);
    ratios.push_back(times[i] / floors.back());
  }
  return {std::move(of_shape), summarize(floors).median, summarize(ratios).median};
}

/// The floor of timed steps, and their median time over it.
struct step_floor {
  floor_reading in_a_row;  ///< each shape's graph replayed in a row
  /// A sweep's: its shapes' graphs replayed in turn (backward_floor.hpp).
  std::optional<floor_reading> in_turn;
  double launch_us = 0;  ///< the floor graph's cudaGraphLaunch, median over shapes
};

/// The floor (bench/backward_floor.hpp) of the steps timed as `times`, the
/// first of them step `first_step`: one shape's, or with `shape_sweep` each
/// batch size's, a step held to the floor of its own shape: with a sweep
/// the median of the steps' floors and of their times over them (a median
/// over four batch sizes falls between two of them), and the same with the
/// shapes' floor graphs replayed in turn. Nullopt without the CUDA
/// toolkit's headers.
std::optional<step_floor> floor_of_steps(gradd::models::model& model, int64_t first_step,
                                         const std::vector<double>& times, bool shape_sweep) {
  gradd::disable_guard off;
  int64_t shapes = shape_sweep ? sweep_batch_sizes : 1;
  int64_t after = first_step + static_cast<int64_t>(times.size());
  std::vector<double> floor_of_shape(shapes);  // by step % shapes
  std::vector<double> launches;
  for (int64_t step = after; step < after + shapes; ++step) {
    auto floor = gradd::measure::measure_backward_floor(model, step, 50);
    if (!floor)
      return std::nullopt;
    floor_of_shape[step % shapes] = floor->ms;
    launches.push_back(floor->launch_us);
  }
  step_floor floor{held_to(times, first_step, std::move(floor_of_shape)), std::nullopt,
                   summarize(launches).median};
  if (shape_sweep) {
    auto in_turn = gradd::measure::measure_rotating_floor(model, after, static_cast<int>(shapes), 50);
    std::vector<double> of_shape(shapes);
    for (int64_t s = 0; s < shapes; ++s)
      of_shape[(after + s) % shapes] = in_turn.at(s);
    floor.in_turn = held_to(times, first_step, std::move(of_shape));
  }
  return floor;
}

/// Runs the benchmark `o` describes and prints its JSON line.
int run(const options& o) {
  if (o.deterministic) {
    at::globalContext().setDeterministicCuDNN(true);
    at::globalContext().setBenchmarkCuDNN(false);
  }
  penalize_gradients(o.create_graph);
  torch::Device device = o.device == "cuda" ? torch::Device(torch::kCUDA) : torch::Device(torch::kCPU);
  bool structure_sweep = o.structures == "sweep";
  bool shape_sweep = o.shapes == "sweep";
  auto model = gradd::models::make_model(o.model, device, torch::kFloat32,
                                         gradd::models::model_size::bench,
                                         structure_sweep ? sweep_structures : 1);
  if (shape_sweep)
    model->sweep_batch_sizes(sweep_batch_sizes);
  bool run_gradd = o.mode != "eager";
  bool run_eager = o.mode != "gradd";

  // gradd stays enabled (its pipeline running) for the whole run; stock
  // iterations step out of it with a disable_guard, which only unhooks.
  gradd::reset();
  gradd::enable_guard on{o.policy};
  double slowest_gradd = 0, slowest_eager = 0;
  int64_t slowest_gradd_step = 0;
  uint64_t captures_before_slowest = 0;
  auto step = [&](int64_t i, bool with_gradd) {
    auto time = timed_backward(*model, i, with_gradd, device);
    if (with_gradd && time.ms > slowest_gradd) {
      slowest_gradd_step = i;
      captures_before_slowest = gradd::stats().graph_captures;
    }
    auto& slowest = with_gradd ? slowest_gradd : slowest_eager;
    slowest = std::max(slowest, time.ms);
    return time;
  };
  for (int i = 0; i < stock_warmups; ++i)
    timed_backward(*model, 0, false, device);
  // The stock engine's training step before gradd holds any graph, whose
  // pools the process would count for it too.
  bool measures_steps = device.is_cuda() && o.mode == "both" && !o.create_graph;
  gradd::measure::device_peaks eager_step;
  bool snapshots = measures_steps && !o.memory_snapshot.empty();
  if (snapshots)
    gradd::measure::record_allocation_stacks();
  if (measures_steps)
    eager_step = training_step_peaks(*model, 0, false, device, measured_steps);
  if (snapshots)
    gradd::measure::write_memory_snapshot(o.memory_snapshot + "-stock.pickle");
  double first_ms = step(0, run_gradd).ms;
  // The stock engine's first backward of this structure and shape, CUDA
  // warmed up as for gradd's: what a new structure's first_ms is held to.
  double eager_first_ms = run_eager && run_gradd ? step(0, false).ms : 0;
  for (int i = 1; i < o.warmup; ++i) {
    if (run_eager && run_gradd)
      step(i, false);
    step(i, run_gradd);
  }
  // CUDA graphs of the warm-up's shapes are captured in the background;
  // time what is served once they are there.
  gradd::wait_for_compiles();
  auto before = gradd::stats();
  std::vector<double> gradd_times, eager_times, gradd_returns, eager_returns;
  auto timed_step = [&](int64_t index, bool with_gradd) {
    auto time = step(index, with_gradd);
    (with_gradd ? gradd_times : eager_times).push_back(time.ms);
    (with_gradd ? gradd_returns : eager_returns).push_back(time.returned_ms);
  };
  // The engines take turns going first: the second backward of a step
  // finds the allocator and the caches as the first left them.
  for (int i = 0; i < o.iters; ++i) {
    int64_t index = o.warmup + i;
    bool gradd_first = i % 2 == 1;
    if (run_gradd && gradd_first)
      timed_step(index, true);
    if (run_eager)
      timed_step(index, false);
    if (run_gradd && !gradd_first)
      timed_step(index, true);
  }
  auto after = gradd::stats();
  if (!o.trace.empty())
    gradd::measure::record_kernel_trace(o.trace, [&] {
      // A second synchronize right before each backward marks where it
      // starts (a forward may synchronize too: a copy from the host).
      auto marked = [&] {
        synchronize(device);
        return [](auto) { return 0; };
      };
      for (int i = 0; i < traced_steps; ++i) {
        int64_t index = o.warmup + o.iters + i;
        if (run_gradd)
          measured_backward(*model, index, true, device, marked);
        if (run_eager)
          measured_backward(*model, index, false, device, marked);
      }
    });
  auto [diff, stock_diff] = max_rel_grad_diffs(*model, o.warmup + o.iters, device);

  auto main_times = run_gradd ? gradd_times : eager_times;
  auto s = summarize(main_times);
  uint64_t plan_backwards = after.plan_backwards - before.plan_backwards;
  uint64_t graph_backwards = after.graph_backwards - before.graph_backwards;
  // Mean CPU microseconds of each piece of a graph hit.
  auto per_hit_us = [&](uint64_t gradd::statistics::*piece) {
    return graph_backwards ? (after.*piece - before.*piece) / 1e3 / graph_backwards : 0.0;
  };
  uint64_t eager_backwards = run_gradd ? after.eager_backwards - before.eager_backwards
                                       : static_cast<uint64_t>(o.iters);
  std::printf("{\"model\": \"%s\", \"device\": \"%s\", \"mode\": \"%s\", \"median_ms\": %.4f, "
              "\"p90_ms\": %.4f, \"first_ms\": %.4f, \"plan_backwards\": %llu, "
              "\"graph_backwards\": %llu, \"eager_backwards\": %llu, \"max_rel_grad_diff\": %.3g, "
              "\"stock_rel_grad_diff\": %.3g, \"deterministic\": %s, \"create_graph\": %s",
              o.model.c_str(), o.device.c_str(), o.mode.c_str(), s.median, s.p90, first_ms,
              static_cast<unsigned long long>(plan_backwards),
              static_cast<unsigned long long>(graph_backwards),
              static_cast<unsigned long long>(eager_backwards), diff, stock_diff,
              o.deterministic ? "true" : "false", o.create_graph ? "true" : "false");
  std::printf(", \"returned_ms\": %.4f",
              summarize(run_gradd ? gradd_returns : eager_returns).median);
  if (graph_backwards)
    std::printf(", \"hit_us\": {\"walk\": %.1f, \"lift\": %.1f, \"copy\": %.1f, "
                "\"launch\": %.1f, \"cuda_launch\": %.1f, \"live_read\": %.1f, \"hand_out\": %.1f}",
                per_hit_us(&gradd::statistics::graph_walk_ns),
                per_hit_us(&gradd::statistics::graph_lift_ns),
                per_hit_us(&gradd::statistics::graph_copy_ns),
                per_hit_us(&gradd::statistics::graph_launch_ns),
                per_hit_us(&gradd::statistics::graph_cuda_launch_ns),
                per_hit_us(&gradd::statistics::graph_live_read_ns),
                per_hit_us(&gradd::statistics::graph_hand_out_ns));
  if (graph_backwards)
    std::printf(", \"rewrites_per_hit\": %.2f, \"early_launches\": %llu, \"early_misses\": %llu, "
                "\"bets_before_engine\": %llu, \"bets_before_walk\": %llu, "
                "\"hits_before_engine\": %llu, \"copy_on_writes\": %llu",
                static_cast<double>(after.graph_rewrites - before.graph_rewrites) / graph_backwards,
                static_cast<unsigned long long>(after.graph_early_launches
                                                - before.graph_early_launches),
                static_cast<unsigned long long>(after.graph_early_misses
                                                - before.graph_early_misses),
                static_cast<unsigned long long>(after.graph_bets_before_engine
                                                - before.graph_bets_before_engine),
                static_cast<unsigned long long>(after.graph_bets_before_walk
                                                - before.graph_bets_before_walk),
                static_cast<unsigned long long>(after.graph_hits_before_engine
                                                - before.graph_hits_before_engine),
                static_cast<unsigned long long>(after.graph_copy_on_writes
                                                - before.graph_copy_on_writes));
  if (o.mode == "both") {
    auto e = summarize(eager_times);
    std::printf(", \"eager_median_ms\": %.4f, \"eager_returned_ms\": %.4f, \"ratio\": %.4f, "
                "\"eager_first_ms\": %.4f, \"first_ratio\": %.4f",
                e.median, summarize(eager_returns).median, s.median / e.median, eager_first_ms,
                first_ms / eager_first_ms);
    if (structure_sweep || shape_sweep)
      std::printf(", \"stall_ratio\": %.4f, \"slowest_ms\": %.4f, \"slowest_step\": %lld, "
                  "\"captures_by_slowest\": %llu, \"eager_slowest_ms\": %.4f",
                  slowest_gradd / slowest_eager, slowest_gradd,
                  static_cast<long long>(slowest_gradd_step),
                  static_cast<unsigned long long>(captures_before_slowest), slowest_eager);
    if (!device.is_cuda())
      gradd::measure::install_cpu_peak_tracking();
    int64_t gradd_peak = 0, eager_peak = 0, eager_working_set = 0;
    for (int r = 0; r < 3; ++r) {
      eager_peak = std::max(eager_peak, backward_peak(*model, r, false, device));
      gradd_peak = std::max(gradd_peak, backward_peak(*model, r, true, device));
      eager_working_set = std::max(
          eager_working_set, backward_peak(*model, r, false, device, /*retain_graph=*/true));
    }
    // A CUDA graph's memory is allocated once, at capture, and held: it
    // counts towards every backward it serves.
    auto graph_stats = gradd::stats();
    auto graph_bytes = static_cast<int64_t>(graph_stats.graph_bytes);
    std::printf(", \"peak_ratio\": %.4f, \"peak_mb\": %.1f, \"eager_peak_mb\": %.1f, "
                "\"eager_working_set_mb\": %.1f, \"graph_mb\": %.1f, \"bound_mb\": %.1f",
                static_cast<double>(gradd_peak + graph_bytes) / eager_peak, gradd_peak / 1e6,
                eager_peak / 1e6, eager_working_set / 1e6, graph_bytes / 1e6,
                graph_stats.graph_bound_bytes / 1e6);
    if (measures_steps) {
      // Steady state: a first sweep of steps, unmeasured, lets every shape
      // it meets be captured, so no capture runs beside the measured ones.
      training_step_peaks(*model, o.warmup + o.iters, true, device, measured_steps);
      gradd::wait_for_compiles();
      if (snapshots)
        gradd::measure::record_allocation_stacks();
      auto replays_before = gradd::stats().graph_backwards;
      auto ours = training_step_peaks(*model, o.warmup + o.iters, true, device, measured_steps);
      auto after = gradd::stats();
      auto step_replays = after.graph_backwards - replays_before;
      if (step_replays < measured_steps)  // what served the others says why
        std::cerr << "gradd-bench: " << measured_steps - step_replays
                  << " measured training steps had no graph; " << after << "\n";
      if (snapshots)
        gradd::measure::write_memory_snapshot(o.memory_snapshot + "-gradd.pickle");
      std::printf(", \"step_peak_ratio\": %.4f, \"step_reserved_ratio\": %.4f, "
                  "\"step_peak_mb\": %.1f, \"eager_step_peak_mb\": %.1f, "
                  "\"step_reserved_mb\": %.1f, \"eager_step_reserved_mb\": %.1f, "
                  "\"step_graph_backwards\": %llu",
                  static_cast<double>(ours.allocated) / eager_step.allocated,
                  static_cast<double>(ours.reserved) / eager_step.reserved, ours.allocated / 1e6,
                  eager_step.allocated / 1e6, ours.reserved / 1e6, eager_step.reserved / 1e6,
                  static_cast<unsigned long long>(step_replays));
    }
    if (device.is_cuda() && !o.create_graph) {
      // A backward recorded for a capture still under way holds the
      // parameters' AccumulateGrad nodes, made on the default stream; the
      // floor's forward on its side stream would reuse them, and the stock
      // engine then made the default stream wait for the floor's capturing
      // stream, which CUDA refuses (seen with compile.delay_ms: 200 on a
      // Hopper GPU, the process ended).
      gradd::wait_for_compiles();
      if (auto floor = floor_of_steps(*model, o.warmup, gradd_times, shape_sweep)) {
        std::printf(", \"floor_ms\": %.4f, \"floor_ratio\": %.4f, \"floor_launch_us\": %.1f",
                    floor->in_a_row.ms, floor->in_a_row.ratio, floor->launch_us);
        if (floor->in_turn)
          std::printf(", \"rotating_floor_ms\": %.4f, \"rotating_floor_ratio\": %.4f",
                      floor->in_turn->ms, floor->in_turn->ratio);
        if (o.step_times) {
          print_list("shape_floor_ms", floor->in_a_row.of_shape);
          if (floor->in_turn)
            print_list("shape_rotating_floor_ms", floor->in_turn->of_shape);
        }
      } else
        std::cerr << "gradd-bench: built without the CUDA toolkit's headers: no floor_ms\n";
    }
  }
  if (o.step_times)
    print_list("step_ms", main_times);
  if (o.grad_ready_times) {
    int64_t last = o.warmup + o.iters;
    if (run_gradd) {
      auto [first, median] = gradient_ready_times(*model, last, true, device, 20);
      std::printf(", \"first_grad_ms\": %.4f, \"median_grad_ms\": %.4f", first, median);
    }
    if (run_eager) {
      auto [first, median] = gradient_ready_times(*model, last, false, device, 20);
      std::printf(", \"eager_first_grad_ms\": %.4f, \"eager_median_grad_ms\": %.4f", first,
                  median);
    }
  }
  if (o.mode == "both") {
    auto [gradd_first, stock_first] = new_structure_firsts(*model, o.warmup + o.iters, device);
    std::printf(", \"first_median_ms\": %.4f, \"eager_first_median_ms\": %.4f, "
                "\"first_median_ratio\": %.4f",
                gradd_first, stock_first, gradd_first / stock_first);
  }
  std::printf("}\n");
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  // Nothing escapes as terminate(): a policy refused at enable (say, an
  // unwritable --dump-ir folder) or a libtorch error ends with its message.
  try {
    return run(gradd::bench::parse(argc, argv));
  } catch (const gradd::config_error& e) {
    std::cerr << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "gradd-bench: " << e.what() << "\n";
    return 1;
  }
}
