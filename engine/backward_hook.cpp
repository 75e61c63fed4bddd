// Dispatch of one backward: walk, look up, run a plan or fall back.
//
// The order of checks is the cost order: settings and thread-local modes
// first (free), then the walk that every plan needs anyway, then one table
// lookup under a shared lock. A hit runs its plan right here, on the
// backward's own thread; nothing on that path touches an actor. A miss
// captures the node table (only this thread may read the live nodes) and,
// unless cache.dir holds a plan for it already, hands it to the pipeline:
// in sync mode at once, waiting for the plan; in async mode once the stock
// engine has served this backward. On a CUDA device a hit may be served by
// a CUDA graph of its shape instead (cuda/graph_path.hpp).

#include "engine/backward_hook.hpp"

#include "actors/job_layout.hpp"
#include "actors/plan_store.hpp"
#include "capture/capture_graph.hpp"
#include "capture/graph_walk.hpp"
#include "compiler/portable_key.hpp"
#include "config/daemon_address.hpp"
#include "config/log.hpp"
#include "cuda/graph_path.hpp"
#include "engine/eager_fallback.hpp"
#include "engine/early_bet.hpp"
#include "engine/engine_state.hpp"
#include "engine/entry_gate.hpp"
#include "engine/nan_check.hpp"
#include "engine/post_processing.hpp"
#include "engine/shared_seed.hpp"
#include "execute/plan_runner.hpp"

#include <ATen/ThreadLocalState.h>
#include <c10/core/AutogradState.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/anomaly_mode.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/graph_task.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <optional>
#include <thread>

namespace gradd::engine {

namespace {

/// A backward woken from its wait for a compile because the process exits:
/// the stock engine must not run while libtorch's statics are destroyed
/// (it crashed in getAccelerator), so the thread stays here until the
/// process has ended, as a thread blocked in a backward does.
[[noreturn]] void park_until_exit() {
  for (;;)
    std::this_thread::sleep_for(std::chrono::hours(1));
}

using torch::autograd::variable_list;

/// Whether `reason` is something gradd cannot run, as opposed to a choice
/// (force_eager), a mode (create_graph, anomaly) or a compile that is not done.
bool is_unsupported(fallback_reason reason) {
  switch (reason) {
    case fallback_reason::nested_tensor:
    case fallback_reason::capture_hook:
      return true;
    default:
      return false;
  }
}

// Note [Backwards that record their graph]
// A backward with create_graph=true runs its nodes with grad mode on, so
// the gradients it makes carry nodes of their own, numbered from the
// sequence counter of the thread that runs them. A plan runs a backward's
// nodes on its caller's thread; the stock engine runs there only the nodes
// whose gradients are on the CPU, and the others on its device threads,
// whose counters no one else can reach. A second backward through the
// nodes made on a device thread would be ordered by numbers gradd cannot
// give, so such backwards stay on the stock engine (create_graph); on the
// CPU, or with autograd's multithreading off (every node on the caller's
// thread), plans serve them, numbering every node as the stock engine does.
bool reaches_device_threads(const std::vector<torch::autograd::Node*>& nodes) {
  if (!c10::AutogradState::get_tls_state().get_multithreading_enabled())
    return false;  // the stock engine runs every node on the caller's thread
  return std::any_of(nodes.begin(), nodes.end(),
                     [](torch::autograd::Node* fn) { return fn->stream().has_value(); });
}

/// Walk storage of this thread, one per nesting level of backward-in-backward.
class walk_scope {
public:
  walk_scope() {
    if (depth_ == walks_.size())
      walks_.push_back(std::make_unique<capture::graph_walk>());
    walk_ = walks_[depth_++].get();
  }
  ~walk_scope() { --depth_; }
  capture::graph_walk& operator*() const noexcept { return *walk_; }

private:
  static thread_local std::vector<std::unique_ptr<capture::graph_walk>> walks_;
  static thread_local size_t depth_;
  capture::graph_walk* walk_;
};

thread_local std::vector<std::unique_ptr<capture::graph_walk>> walk_scope::walks_;
thread_local size_t walk_scope::depth_ = 0;

/// One backward being served.
class backward_call {
public:
  backward_call(const std::shared_ptr<torch::autograd::Node>& root,
                const torch::autograd::GraphTask& task, bool accumulate_grad,
                const std::vector<torch::autograd::Edge>& outputs)
      : state_(engine_state::instance()), policy_(state_.current_policy()),
        config_(*policy_->config), root_(root),
        task_(const_cast<torch::autograd::GraphTask&>(task)),
        accumulate_grad_(accumulate_grad), outputs_(outputs) {}

  /// Serves the backward; counts it once it ends (so that a reset() meanwhile
  /// cannot split its counts): served by a plan, by the stock engine, or
  /// raised.
  variable_list serve() {
    try {
      auto result = serve_counted();
      submit_deferred();
      state_.stats.backwards.fetch_add(1, std::memory_order_relaxed);
      return result;
    } catch (...) {
      submit_deferred();
      state_.stats.raised_backwards.fetch_add(1, std::memory_order_relaxed);
      state_.stats.backwards.fetch_add(1, std::memory_order_relaxed);
      throw;
    }
  }

private:
  variable_list serve_counted() {
    if (config_.fallback.force_eager)
      return eager(fallback_reason::force_eager);
    // The stock engine's workers run nodes under the task's thread-local
    // state, whose grad mode is create_graph.
    at::ThreadLocalStateGuard tls_guard(task_.thread_locals_);
    if (torch::autograd::AnomalyMode::is_enabled())
      return eager(fallback_reason::anomaly_mode);

    walk_scope scope;
    walk_ = &*scope;
    if (!adopt_walk(*policy_, *root_, *walk_))
      capture::walk_graph(*root_, outputs_, task_.keep_graph_, accumulate_grad_, policy_->plan_variant,
                 *walk_);
    records_graph_ = c10::GradMode::is_enabled();
    if (records_graph_ && reaches_device_threads(walk_->nodes))
      return eager(fallback_reason::create_graph);
    auto found = find();
    if (found.ready) {
      state_.stats.cache_hits.fetch_add(1, std::memory_order_relaxed);
      if (due(*found.ready))
        return run(*found.ready);
      return eager_for(found.ready.get());
    }
    state_.stats.cache_misses.fetch_add(1, std::memory_order_relaxed);
    auto record = found.blocked ? found.blocked : compile();
    if (!record)  // another thread claimed it a moment ago
      record = find().blocked;
    if (record && record->state.load() == graph_state::pending
        && config_.compile.mode == compile_mode::sync) {
      record->wait_settled(std::chrono::milliseconds(config_.compile.timeout_ms));
      if (state_.exiting())
        park_until_exit();
    }
    if (record && record->state.load() != graph_state::failed && due(*record)
        && record->state.load(std::memory_order_acquire) == graph_state::ready && fits(*record))
      return run(*record);
    return eager_for(record.get());
  }

  /// Whether `r`'s plan, once there, serves this backward: always, unless
  /// the ranks agree (Note [Agreement across ranks]). Counts the backward
  /// while that matters: a published plan without an agreement, or past
  /// its agreed index, costs a hit two loads, not a shared increment.
  bool due(graph_record& r) {
    if (r.state.load(std::memory_order_acquire) == graph_state::ready) {
      auto from = r.serve_from.load();  // read after state: set before publication
      if (from == 0 || (from != graph_record::not_agreed
                        && r.seen.load(std::memory_order_relaxed) > from))
        return true;
    }
    auto index = r.seen.fetch_add(1, std::memory_order_relaxed);
    if (r.serve_from.load() == graph_record::not_agreed
        && r.state.load(std::memory_order_acquire) == graph_state::ready) {
      // Held for an agreement: this backward may propose (again), and runs
      // the stock engine unless it is the agreed one, which it may have to
      // wait to hear.
      if (auto proposal = r.propose_at(index); proposal && !state_.propose(r.id, *proposal))
        r.included(graph_record::not_agreed);  // gradd is stopping: nothing answers
      r.wait_agreement(index);
    }
    auto from = r.serve_from.load();
    return from != graph_record::not_agreed && index >= from;
  }

  bool fits(const graph_record& r) const {
    return execute::sequence_order_holds(r.compiled->plan, walk_->nodes);
  }

  plan_table::lookup find() const {
    return state_.table.find(walk_->key, [this](const graph_record& r) { return fits(r); });
  }

  /// Claims the structure and captures it for the pipeline; nullptr if
  /// another thread compiles it. In async mode the pipeline gets it once
  /// this backward is served (Note [Compile after the first backward]).
  std::shared_ptr<graph_record> compile() {
    auto record = state_.table.claim(walk_->key);
    if (!record)
      return nullptr;
    state_.stats.captures.fetch_add(1, std::memory_order_relaxed);
    auto captured = capture::capture_graph(*walk_, task_, outputs_, accumulate_grad_);
    if (captured.eager_reason) {
      state_.table.fail(*record, *captured.eager_reason,
                        std::chrono::steady_clock::time_point::max());
    } else if (load_stored(*record, captured.ir)) {
      // A plan kept by an earlier process or the daemon serves it at once.
    } else if (config_.compile.mode == compile_mode::sync) {
      submit(*record, std::move(captured.ir));
    } else {
      deferred_.emplace(deferred_compile{record, std::move(captured.ir)});
    }
    return record;
  }

  // Note [Compile after the first backward]
  // In async mode the stock engine serves a new structure's first backward
  // while its plan compiles. Sending the node table before that backward
  // woke the pipeline's threads while the stock engine ran: on the 2-core
  // VM a woken actor thread took the training thread's core for ~1.4 ms in
  // one first backward of five, and the compile took a core from the
  // backward's intra-op threads the whole time. Sent once the backward is
  // served, the compile overlaps what the training loop does next; the
  // plan is ready one backward's time later.
  void submit_deferred() {
    if (!deferred_)
      return;
    auto deferred = std::move(*deferred_);
    deferred_.reset();  // first: a submit that throws is not repeated by serve()'s catch
    submit(*deferred.record, std::move(deferred.table));
  }

  void submit(graph_record& record, compiler::graph table) {
    if (!state_.submit(record.id, std::move(table))) {
      // No pipeline (gradd is being disabled): not compiled, due at once.
      state_.table.fail(record, fallback_reason::compile_pending,
                        std::chrono::steady_clock::time_point::min());
    }
  }

  /// Publishes the plan kept for the structure of node table `table`, if
  /// there is one for it (same structure, same sequence order): in this
  /// process's cache.dir, else in its daemon's. Returns whether there was.
  bool load_stored(graph_record& record, const compiler::graph& table) {
    // A rank that agrees its switches with the job's other ranks (Note
    // [Agreement across ranks]) loads nothing: a plan loaded at a miss
    // would serve at once, at no agreed index. It asks its daemon, which
    // loads the plan from its own cache.dir and takes part in agreement.
    if (agrees_with_job())
      return false;
    auto variant = policy_->plan_variant;
    if (!config_.cache.dir.empty()) {
      record.portable_key = compiler::portable_key(table, variant);
      if (publish_stored(record, table, config_.cache.dir, record.portable_key))
        return true;
    }
    // Note [Warm start from the daemon's cache]: the daemon of this machine
    // keeps every plan it compiled in its cache.dir, one file per structure
    // and sequence order, and names that folder in its welcome. A miss
    // reads it there, as it would its own cache.dir: a job that starts on
    // a warm daemon serves its first backward of each structure from a plan
    // without a round trip (the node table both ways is most of one). A
    // remote daemon's folder is not here, and the load finds nothing. Ranks
    // that agree on their switches (Note [Agreement across ranks]) are not
    // told the folder: they ask the daemon, which answers from memory.
    auto daemon_dir = state_.stats.daemon.cache_dir.load();
    return daemon_dir && !daemon_dir->empty()
           && publish_stored(record, table, *daemon_dir, compiler::shared_plan_key(table, variant));
  }

  /// Whether this process's switches to plans are agreed with its job's
  /// other ranks: a job of several ranks compiling asynchronously with a
  /// daemon (actors/daemon_link.hpp).
  bool agrees_with_job() const {
    return config_.compile.mode == compile_mode::async && configured_daemon(config_)
           && actors::read_job_layout().shared();
  }

  bool publish_stored(graph_record& record, const compiler::graph& table, const std::string& dir,
                      uint64_t key) {
    auto stored = actors::load_plan_for(dir, key, table,
                                        size_t{config_.daemon.max_message_mb} << 20);
    if (!stored.refused.empty())
      log(config_.logging.level, log_level::warning,
          "plan file " + actors::plan_file(dir, key) + " refused (" + stored.refused
              + "); graph " + std::to_string(record.id) + " compiles again");
    if (!stored.plan)
      return false;
    auto compiled = std::make_shared<compiled_graph>();
    compiled->ir = std::move(stored.plan->ir);
    compiled->plan = std::move(stored.plan->plan);
    state_.table.publish(record, std::move(compiled), 0.0, config_.cache.max_plans);
    state_.stats.plans_loaded.fetch_add(1, std::memory_order_relaxed);
    return true;
  }

  variable_list run(graph_record& record) {
    record.hits.fetch_add(1, std::memory_order_relaxed);
    running_plan running(record);
    std::function<void(execute::output_tap*)> plan = [&](execute::output_tap* tap) {
      own_seeds_scope own(*root_);
      execute::run_plan(record.compiled->plan, walk_->nodes, task_, tap);
    };
    std::optional<variable_list> served;
    if (!records_graph_)
      served = cuda::serve_from_graph({record.id, record.compiled->ir, walk_->nodes, root_,
                                       task_, accumulate_grad_, outputs_, config_, plan,
                                       entered_, bet_});
    if (served)
      task_.captured_vars_ = std::move(*served);
    else
      plan(nullptr);
    run_post_processing(task_);
    if (config_.nan_check.enabled)
      check_for_nan(walk_->nodes, task_.captured_vars_);
    state_.stats.plan_backwards.fetch_add(1, std::memory_order_relaxed);
    return std::move(task_.captured_vars_);
  }

  variable_list eager_for(graph_record* record) {
    auto reason = fallback_reason::compile_pending;
    if (record) {
      record->eager_backwards.fetch_add(1, std::memory_order_relaxed);
      if (record->state.load(std::memory_order_acquire) == graph_state::failed)
        reason = record->eager_reason;
      else
        record->pending_backwards.fetch_add(1, std::memory_order_relaxed);
    }
    return eager(reason, [&](const variable_list& result) {
      if (config_.nan_check.enabled)
        check_for_nan(walk_->nodes, result);
    });
  }

  /// Runs the backward on the stock engine, then `check`s its result;
  /// counted as served by the stock engine once both returned.
  variable_list eager(fallback_reason reason,
                      const std::function<void(const variable_list&)>& check = {}) {
    TORCH_CHECK(!is_unsupported(reason)
                    || config_.fallback.on_unsupported != unsupported_policy::error,
                "gradd: cannot serve this backward: ", to_string(reason),
                " (policy fallback.on_unsupported: error)");
    state_.warn_fallback(reason);
    variable_list result;
    {
      own_seeds_scope own(*root_);
      result = run_on_stock_engine(root_, task_);
    }
    if (check)
      check(result);
    state_.count_fallback(reason);
    return result;
  }

  engine_state& state_;
  std::shared_ptr<const serving_policy> policy_;
  const settings& config_;
  const std::shared_ptr<torch::autograd::Node>& root_;
  torch::autograd::GraphTask& task_;
  bool accumulate_grad_;
  const std::vector<torch::autograd::Edge>& outputs_;
  capture::graph_walk* walk_ = nullptr;
  bool records_graph_ = false;  ///< create_graph (Note [Backwards that record their graph])
  struct deferred_compile {
    std::shared_ptr<graph_record> record;
    compiler::graph table;
  };
  std::optional<deferred_compile> deferred_;  ///< submitted once this backward is served
  std::chrono::steady_clock::time_point entered_ = std::chrono::steady_clock::now();
  /// Placed before Engine::execute (Note [Bets before the engine]); a
  /// backward that does not reach the graph path drops it, a lost bet.
  cuda::early_bet bet_ = take_early_bet();
};

} // namespace

variable_list serve_backward(const std::shared_ptr<torch::autograd::Node>& graph_root,
                             const torch::autograd::GraphTask& task, bool accumulate_grad,
                             const std::vector<torch::autograd::Edge>& outputs) {
  pass_entry_gate();
  return backward_call(graph_root, task, accumulate_grad, outputs).serve();
}

} // namespace gradd::engine
