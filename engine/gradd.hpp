#pragma once

// gradd's in-process API: the one header a training program includes.
//
// gradd takes over every backward() and autograd::grad() of the process while
// it is enabled: it captures the autograd graph, compiles it into a plan and
// runs the plan instead of libtorch's stock engine, with the stock engine's
// gradients. What it cannot run goes to the stock engine, counted by reason.
//
//   gradd::enable_guard on;          // gradd serves backwards in this scope
//   loss.backward();
//   std::cout << gradd::stats();     // who served them

#include <array>
#include <cstdint>
#include <iosfwd>
#include <string>

namespace gradd {

/// Why a backward ran on the stock engine instead of a plan.
enum class fallback_reason : uint8_t {
  force_eager,       ///< the settings ask for the stock engine
  create_graph,      ///< create_graph=true (higher-order gradients)
  anomaly_mode,      ///< autograd anomaly detection is on
  python_node,       ///< a node implemented in Python
  python_hook,       ///< a hook implemented in Python
  nested_tensor,     ///< a nested tensor flows through the graph
  capture_hook,      ///< a deprecated grad-capture hook on an input
  compile_error,     ///< gradd failed to compile the graph
};

/// Number of fallback reasons.
inline constexpr size_t fallback_reason_count = 8;

/// Returns the reason's name, e.g. "create_graph".
const char* to_string(fallback_reason reason) noexcept;

/// Counters since the process started or the last reset(). A snapshot:
/// counters of concurrent backwards may be mid-update.
struct statistics {
  uint64_t backwards = 0;        ///< backwards gradd's hook received
  uint64_t plan_backwards = 0;   ///< served by a plan
  uint64_t eager_backwards = 0;  ///< served by the stock engine
  std::array<uint64_t, fallback_reason_count> eager_by_reason{};  ///< by fallback_reason
  uint64_t captures = 0;         ///< graphs captured into IR
  uint64_t cache_hits = 0;       ///< backwards whose structure had a plan
  uint64_t cache_misses = 0;     ///< backwards with a new structure
  uint64_t plans = 0;            ///< plans in the cache

  /// Backwards that fell back for `reason`.
  uint64_t eager_for(fallback_reason reason) const noexcept {
    return eager_by_reason[static_cast<size_t>(reason)];
  }
};

/// Writes the statistics as one line of `key=value` pairs.
std::ostream& operator<<(std::ostream& out, const statistics& s);

/// How gradd serves backwards while enabled. Constructing one does no work.
struct settings {
  /// Serve every backward with the stock engine (counted as force_eager).
  bool force_eager = false;
};

/// Enables gradd for the whole process with `config`, replacing the settings
/// of an earlier enable(). Throws if another thread is inside a backward.
void enable(const settings& config = {});

/// Disables gradd: later backwards run on the stock engine untouched.
/// Throws if another thread is inside a backward.
void disable();

/// Whether gradd serves backwards now.
bool is_enabled() noexcept;

/// Drops every cached plan and zeroes the statistics. Thread-safe; backwards
/// that already hold a plan finish with it.
void reset();

/// Returns the statistics. Thread-safe.
statistics stats();

/// Enables gradd for a scope and restores the previous state (enabled with
/// its settings, or disabled) on exit. Scopes nest; an inner one must end
/// before an outer one, as with PyTorch's compiled_autograd._enable.
class enable_guard {
public:
  explicit enable_guard(const settings& config = {});
  ~enable_guard();
  enable_guard(const enable_guard&) = delete;
  enable_guard& operator=(const enable_guard&) = delete;

private:
  bool was_enabled_;
  settings previous_;
};

/// Disables gradd for a scope and restores the previous state on exit, as
/// compiled_autograd._disable.
class disable_guard {
public:
  disable_guard();
  ~disable_guard();
  disable_guard(const disable_guard&) = delete;
  disable_guard& operator=(const disable_guard&) = delete;

private:
  bool was_enabled_;
  settings previous_;
};

} // namespace gradd
