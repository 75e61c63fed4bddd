#pragma once

// gradd's policy as a plain value: what a YAML policy file sets. Every
// member's default is the documented default (config/schema.cpp holds the
// table that documents and parses them).

#include <cstdint>
#include <string>

namespace gradd {

/// When a new graph's plan is built.
enum class compile_mode : uint8_t {
  async,  ///< the backward runs on the stock engine; later ones use the plan
  sync,   ///< the backward waits for its plan
};

/// What happens to a structure whose compile failed.
enum class compile_error_policy : uint8_t {
  retry_after,  ///< the stock engine serves it for fallback.retry_after_ms, then it compiles again
  never_retry,  ///< the stock engine serves it for good
};

/// What happens to a backward gradd cannot run (nested tensors, capture hooks).
enum class unsupported_policy : uint8_t {
  eager,  ///< run it on the stock engine, count and warn once
  error,  ///< raise an error naming the reason
};

/// Which shapes of a structure get CUDA graphs (cuda_graphs.mode).
enum class graph_shape_policy : uint8_t {
  static_shapes,   ///< "static": a graph for every shape seen
  auto_shapes,     ///< "auto": a graph for a shape once it recurs; plans for a structure whose shapes keep changing
  dynamic_shapes,  ///< "dynamic": plans only
};

/// How a CUDA graph's gradients reach `.grad` (cuda_graphs.hand_out).
enum class grad_hand_out : uint8_t {
  borrow,  ///< the graph's own buffers; copied away first if still held at the next replay
  copy,    ///< a copy of them, every backward
};

/// What a process with a daemon configured does while the daemon cannot
/// serve it (daemon.fallback).
enum class daemon_fallback : uint8_t {
  local,  ///< compile in this process, as without a daemon
  stock,  ///< the stock engine serves the structure until the daemon is back
};

/// Logging verbosity.
enum class log_level : uint8_t { error, warning, info, debug };

/// How gradd serves backwards. Constructing one does no work.
struct settings {
  struct compile_section {
    compile_mode mode = compile_mode::async;
    uint32_t threads = 1;        ///< TBB threads for passes and plan building
    uint32_t timeout_ms = 10000; ///< a compile running longer counts as failed
    uint32_t delay_ms = 0;       ///< test knob: each compile waits this long first
  } compile;
  struct cache_section {
    uint32_t max_plans = 256;    ///< least recently used plans go beyond this
    std::string dir;             ///< keep compiled plans in this folder too ("" = off)
  } cache;
  struct fallback_section {
    compile_error_policy on_compile_error = compile_error_policy::retry_after;
    uint32_t retry_after_ms = 60000;
    unsupported_policy on_unsupported = unsupported_policy::eager;
    bool force_eager = false;    ///< serve every backward with the stock engine
  } fallback;
  struct nan_check_section {
    bool enabled = false;        ///< raise after a backward whose gradients hold NaN
  } nan_check;
  struct passes_section {
    std::string pipeline = "default";  ///< pass names, comma-separated
    bool gradient_ready = false;       ///< append gradient_ready_schedule

    /// The passes that run, in order: `pipeline`, then gradient_ready_schedule
    /// if `gradient_ready`.
    std::string effective_pipeline() const {
      return gradient_ready ? pipeline + ",gradient_ready_schedule" : pipeline;
    }
  } passes;
  struct cuda_graphs_section {
    bool enabled = true;         ///< serve CUDA backwards from CUDA graphs where the policy allows
    graph_shape_policy mode = graph_shape_policy::auto_shapes;
    uint32_t max_graphs = 8;     ///< per structure; the least recently used one goes first
    uint32_t dynamic_after = 16; ///< auto: shapes seen before a structure stays on plans
    uint32_t memory_limit_mb = 4096;  ///< static buffers and pools of all graphs together
    grad_hand_out hand_out = grad_hand_out::borrow;
    bool early_launch = true;    ///< launch a steady structure's graph before its lift (Note [Early launch])
    /// Nodes a structure's graphs may be cut at, called live between pieces
    /// (Note [Piecewise graphs]); a structure with more stays on plans.
    uint32_t max_cuts = 64;
  } cuda_graphs;
  struct daemon_section {
    /// A process: the `gradd daemon` to compile with, "host:port" ("" or
    /// port 0: none); $GRADD_DAEMON wins. The daemon: where it listens.
    std::string address;
    /// The daemon's token, mode 0600 ("" = /tmp/gradd-<uid>/token);
    /// $GRADD_TOKEN_FILE wins. The daemon creates it if missing.
    std::string token_file;
    uint32_t timeout_ms = 15000;       ///< a request (a compile included) gives up after this
    daemon_fallback fallback = daemon_fallback::local;
    uint32_t retry_after_ms = 2000;    ///< a lost daemon is tried again after this
    /// How long a rank's proposal waits for the job's answer (it proposes again
    /// meanwhile), and a store exchange's bound (Note [Agreement across ranks]).
    uint32_t agreement_timeout_ms = 10000;
    uint32_t max_clients = 256;        ///< the daemon: connections it welcomes at once
    uint32_t max_requests_per_client = 64;  ///< the daemon: compile requests waiting per client
    uint32_t max_nodes = 1000000;      ///< the daemon: nodes of a graph it takes
    /// The largest message either end of the daemon's wire reads, and the
    /// largest plan file gradd reads; larger ones are refused unread.
    uint32_t max_message_mb = 256;
  } daemon;
  struct logging_section {
    log_level level = log_level::warning;
    std::string ir_dump_dir;     ///< write each captured graph's IR here ("" = off)
  } logging;
  /// Where these settings came from, for error messages: the policy file
  /// load_settings read, "" for settings made in code.
  std::string source;
};

} // namespace gradd
