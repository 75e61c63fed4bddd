#pragma once

#include "capture/structural_key.hpp"
#include "compiler/ir.hpp"
#include "compiler/plan.hpp"
#include "gradd/statistics.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <unordered_map>
#include <vector>

namespace gradd::engine {

/// What gradd made of one captured structure.
struct compiled_graph {
  compiler::graph ir;
  compiler::plan plan;
};

/// One structure (one variant of a key) in the table, with its statistics.
/// The registry stage moves it from pending to ready or failed; callers read
/// `state` (acquire) before `compiled` or `eager_reason`.
struct graph_record {
  graph_record(uint64_t id, capture::structural_key key) : id(id), key(std::move(key)) {}

  const uint64_t id;
  const capture::structural_key key;
  const std::chrono::steady_clock::time_point claimed_at = std::chrono::steady_clock::now();
  std::atomic<graph_state> state{graph_state::pending};
  std::shared_ptr<const compiled_graph> compiled;  ///< set before state = ready
  fallback_reason eager_reason = fallback_reason::compile_error;  ///< when failed
  std::chrono::steady_clock::time_point retry_at = std::chrono::steady_clock::time_point::max();
  double compile_ms = 0;
  uint32_t nodes = 0;
  uint64_t portable_key = 0;  ///< its file in cache.dir (compiler/portable_key.hpp); set at claim

  std::atomic<uint64_t> last_used{0};       ///< LRU clock reading of the last hit
  std::atomic<int> running{0};              ///< backwards running its plan now
  std::atomic<uint64_t> hits{0};
  std::atomic<uint64_t> pending_backwards{0};
  std::atomic<uint64_t> eager_backwards{0};
  std::atomic<uint64_t> compiles{0};

  // Note [Agreement across ranks]: with a daemon, the ranks of a job start
  // serving a structure from its plan at the same backward index of that
  // structure, so that hooks that launch collectives (DDP's) fire in the
  // same order on every rank. Each backward of the structure takes the next
  // index from `seen`; the plan serves from index `serve_from` on. A rank
  // whose plan is held for an agreement serves the stock engine: once the
  // plan is published, a backward proposes its index plus twice a lead
  // (through the daemon link), and proposes again once the backwards have
  // come within one lead of that, until the daemon's answer, the largest of
  // every rank's latest proposal, sets `serve_from`. The lead is the
  // backwards of agreement_horizon at the rate since the last proposal (for
  // the first, since the plan was held), taken over a quarter horizon at
  // least, and at least agreement_lead. 0 means no agreement: proposals are
  // never 0.
  //
  // The answer is at least every proposal the daemon took in before it
  // answered: the first always (it cannot answer without it), a renewal
  // once the daemon has acknowledged it (daemon link, `included`).
  // `agreed_at_least` is the largest such proposal. A backward below it
  // runs the stock engine knowing that the switch is still ahead; one that
  // reaches it without an answer renews and waits for the answer or the
  // acknowledgement, at most `longest_wait`, so that no rank passes the
  // agreed index unknowing. The daemon acknowledges by itself, at once, so
  // the wait is on the daemon, never on another rank; a renewal that comes
  // during a store exchange hears `exchanging` (the exchange waits on the
  // other machines), and the backwards stop waiting (included()).
  static constexpr uint64_t not_agreed = UINT64_MAX;
  static constexpr uint64_t agreement_lead = 4;
  static constexpr std::chrono::milliseconds agreement_horizon{250};
  std::atomic<uint64_t> seen{0};        ///< backwards of this structure, while they matter
  std::atomic<uint64_t> serve_from{0};  ///< 0: at once; not_agreed while the ranks agree
  std::atomic<uint64_t> proposal{0};    ///< this rank's latest; 0 before the first
  std::atomic<uint64_t> renew_at{0};    ///< the backward that proposes again
  std::atomic<uint64_t> proposed_index{0};  ///< the backward that proposed last
  std::atomic<int64_t> proposed_ns{0};      ///< and when (steady clock)
  /// The answer is known to be no earlier; not_agreed: nothing to wait for.
  std::atomic<uint64_t> agreed_at_least{not_agreed};
  std::atomic<std::chrono::milliseconds> longest_wait{};  ///< set by hold_for_agreement

  /// Waits until the record leaves `pending`, at most `timeout`.
  bool wait_settled(std::chrono::milliseconds timeout);
  /// Wakes wait_settled; call after changing `state`.
  void notify_settled();

  /// Holds the plan back until agree(): the stock engine serves meanwhile,
  /// and a backward that reaches agreed_at_least waits for the answer at
  /// most `longest_wait`.
  void hold_for_agreement(std::chrono::milliseconds longest_wait);
  /// While the plan is held: the proposal backward `index` makes, if it is
  /// the one to propose (again); stored as the latest.
  std::optional<uint64_t> propose_at(uint64_t index);
  /// The plan serves from backward `index` on; the first answer holds (a
  /// rank hears the same index for each proposal it made). False when this
  /// rank's backwards had already passed `index`: it switches later than
  /// the others.
  bool agree(uint64_t index);
  /// The daemon took in proposal `index` before any answer (the answer is
  /// no earlier); not_agreed: no answer is on its way (no daemon, or it
  /// failed), so backwards stop waiting for one.
  void included(uint64_t index);
  /// Backward `index` of a held plan waits while the answer could be
  /// `index` and is not known yet, at most longest_wait (after which no
  /// backward waits again).
  void wait_agreement(uint64_t index);

private:
  std::mutex settle_mutex_;
  std::condition_variable settled_;
};

/// Counts a backward that runs `record`'s plan, while it lives, in
/// graph_record::running (eviction skips such records).
class running_plan {
public:
  explicit running_plan(graph_record& record) : record_(record) { record_.running.fetch_add(1); }
  ~running_plan() { record_.running.fetch_sub(1); }
  running_plan(const running_plan&) = delete;
  running_plan& operator=(const running_plan&) = delete;

private:
  graph_record& record_;
};

/// Every structure gradd has seen, by structural key, a few variants per key
/// (the same structure recorded in another sequence-number order).
///
/// Thread-safety: lookups take a shared lock; claims, publication and
/// eviction take the exclusive lock and are rare. Records are shared
/// pointers, so a backward that holds one keeps its plan alive across an
/// eviction; eviction also skips records whose plan is running.
class plan_table {
public:
  /// What a lookup found for a key.
  struct lookup {
    std::shared_ptr<graph_record> ready;    ///< a plan that serves this backward
    std::shared_ptr<graph_record> blocked;  ///< pending, or failed and not due for retry
  };

  /// Looks `key` up; `fits` says whether a ready record's plan serves this
  /// backward (its sequence order holds). Marks a ready hit as used.
  lookup find(const capture::structural_key& key,
              const std::function<bool(const graph_record&)>& fits) const;

  /// Inserts a pending record for `key` unless one is pending already (then
  /// returns nullptr: someone else compiles it). Concurrent misses of one key
  /// thus compile once.
  std::shared_ptr<graph_record> claim(const capture::structural_key& key);

  /// Looks a record up by id (the registry's view).
  std::shared_ptr<graph_record> record(uint64_t id) const;

  /// Marks `r` ready with `compiled`, then evicts down to `max_plans`.
  void publish(graph_record& r, std::shared_ptr<const compiled_graph> compiled,
               double compile_ms, size_t max_plans);

  /// Marks `r` failed for `reason` until `retry_at`.
  void fail(graph_record& r, fallback_reason reason,
            std::chrono::steady_clock::time_point retry_at);

  /// Removes pending records (their compiles will not finish) and wakes
  /// their waiters: their backwards go to the stock engine, and the next
  /// backward of their structure compiles it again.
  void drop_pending();

  /// Removes `r`, pending, as drop_pending does.
  void drop(graph_record& r);

  /// Removes every record; pending ones settle as drop_pending's do, and
  /// plans held back for an agreement serve from their own proposal.
  void clear();
  /// Ready plans in the table.
  size_t plans() const;
  std::vector<graph_statistics> statistics() const;

private:
  void evict_to(size_t max_plans);  // requires mutex_

  mutable std::shared_mutex mutex_;
  std::unordered_map<capture::structural_key, std::vector<std::shared_ptr<graph_record>>,
                     capture::structural_key_hash> by_key_;
  std::unordered_map<uint64_t, std::shared_ptr<graph_record>> by_id_;
  uint64_t next_id_ = 1;
  mutable std::atomic<uint64_t> clock_{0};
};

} // namespace gradd::engine
