// The plan table: the registry's bookkeeping, readable from any thread.

#include "engine/plan_table.hpp"

#include <algorithm>

namespace gradd::engine {

bool graph_record::wait_settled(std::chrono::milliseconds timeout) {
  std::unique_lock lock(settle_mutex_);
  return settled_.wait_for(lock, timeout,
                           [&] { return state.load() != graph_state::pending; });
}

void graph_record::notify_settled() {
  std::lock_guard lock(settle_mutex_);
  settled_.notify_all();
}

void graph_record::hold_for_agreement(std::chrono::milliseconds wait_at_most) {
  longest_wait.store(wait_at_most);
  agreed_at_least.store(not_agreed);
  proposal.store(0);
  // The first proposal's lead comes from the rate of the backwards from
  // now on (propose_at). A fixed first lead was passed before the answer
  // came where backwards are fast, and so was one from the rate since the
  // structure was claimed, which takes in a process's slow first backwards
  // (the two-machine case, 1 run in 3 each).
  auto index = seen.load();
  proposed_ns.store(std::chrono::steady_clock::now().time_since_epoch().count());
  proposed_index.store(index);
  renew_at.store(index + agreement_lead);
  serve_from.store(not_agreed);
  notify_settled();  // a backward waiting on an earlier hold: nothing to wait for now
}

std::optional<uint64_t> graph_record::propose_at(uint64_t index) {
  auto due = renew_at.load();
  if (index < due)
    return std::nullopt;
  // UINT64_MAX while this backward proposes: the others pass by.
  if (!renew_at.compare_exchange_strong(due, UINT64_MAX))
    return std::nullopt;
  // The rate of a few milliseconds' backwards, a burst on an idle core,
  // made one rank's lead five times the others' and the agreed switch come
  // after the run: the rate is taken over a quarter horizon at least.
  auto now = std::chrono::steady_clock::now().time_since_epoch().count();
  auto horizon = std::chrono::nanoseconds(agreement_horizon).count();
  auto last_ns = proposed_ns.load();
  // A backward that reached the latest proposal renews it at once: it is
  // to wait for the daemon to take in the renewal (wait_agreement).
  auto latest = proposal.load();
  bool reached = latest != 0 && index >= latest;
  if (now - last_ns < horizon / 4 && !reached) {
    renew_at.store(due);
    return std::nullopt;
  }
  proposed_ns.store(now);
  auto last_index = proposed_index.exchange(index);
  auto lead = agreement_lead;
  if (index > last_index) {
    auto per_horizon =
        static_cast<double>(index - last_index) * horizon / std::max<int64_t>(now - last_ns, 1);
    lead = std::max(lead, static_cast<uint64_t>(per_horizon) + 1);
  }
  auto next = index + 2 * lead;
  if (proposal.exchange(next) == 0)
    agreed_at_least.store(next);  // the daemon cannot answer without it
  renew_at.store(index + lead);
  return next;
}

bool graph_record::agree(uint64_t index) {
  auto held = not_agreed;
  serve_from.compare_exchange_strong(held, index);
  notify_settled();
  return seen.load() <= index;
}

void graph_record::included(uint64_t index) {
  auto known = agreed_at_least.load();
  // After no_agreement (not_agreed), a daemon that is back acknowledges anew.
  while ((known == not_agreed || index > known)
         && !agreed_at_least.compare_exchange_weak(known, index)) {
  }
  notify_settled();
}

void graph_record::wait_agreement(uint64_t index) {
  auto answered_or_ahead = [&] {
    return serve_from.load() != not_agreed || agreed_at_least.load() > index;
  };
  if (answered_or_ahead())
    return;
  std::unique_lock lock(settle_mutex_);
  if (!settled_.wait_for(lock, longest_wait.load(), answered_or_ahead))
    agreed_at_least.store(not_agreed);
}

plan_table::lookup plan_table::find(const capture::structural_key& key,
                                    const std::function<bool(const graph_record&)>& fits) const {
  lookup result;
  std::shared_lock lock(mutex_);
  auto found = by_key_.find(key);
  if (found == by_key_.end())
    return result;
  auto now = std::chrono::steady_clock::time_point::min();
  for (const auto& r : found->second) {
    switch (r->state.load(std::memory_order_acquire)) {
      case graph_state::ready:
        if (fits(*r)) {
          r->last_used.store(clock_.fetch_add(1, std::memory_order_relaxed),
                             std::memory_order_relaxed);
          result.ready = r;
          return result;
        }
        break;
      case graph_state::pending:
        result.blocked = r;
        break;
      case graph_state::failed:
        if (now == std::chrono::steady_clock::time_point::min())
          now = std::chrono::steady_clock::now();
        if (now < r->retry_at)
          result.blocked = r;
        break;
    }
  }
  return result;
}

std::shared_ptr<graph_record> plan_table::claim(const capture::structural_key& key) {
  std::unique_lock lock(mutex_);
  auto& variants = by_key_[key];
  auto now = std::chrono::steady_clock::now();
  for (const auto& r : variants) {
    auto s = r->state.load();
    if (s == graph_state::pending || (s == graph_state::failed && now < r->retry_at))
      return nullptr;
  }
  // Failed records due for a retry make way for the new attempt.
  std::erase_if(variants, [&](const auto& r) {
    bool drop = r->state.load() == graph_state::failed;
    if (drop)
      by_id_.erase(r->id);
    return drop;
  });
  auto r = std::make_shared<graph_record>(next_id_++, key);
  variants.push_back(r);
  by_id_.emplace(r->id, r);
  return r;
}

std::shared_ptr<graph_record> plan_table::record(uint64_t id) const {
  std::shared_lock lock(mutex_);
  auto found = by_id_.find(id);
  return found == by_id_.end() ? nullptr : found->second;
}

void plan_table::publish(graph_record& r, std::shared_ptr<const compiled_graph> compiled,
                         double compile_ms, size_t max_plans) {
  {
    std::unique_lock lock(mutex_);
    r.compile_ms = compile_ms;
    r.nodes = static_cast<uint32_t>(compiled->ir.nodes.size());
    r.compiled = std::move(compiled);
    r.last_used = clock_.fetch_add(1, std::memory_order_relaxed);
    r.state.store(graph_state::ready, std::memory_order_release);
    evict_to(max_plans);
  }
  r.notify_settled();
}

void plan_table::fail(graph_record& r, fallback_reason reason,
                      std::chrono::steady_clock::time_point retry_at) {
  {
    std::unique_lock lock(mutex_);
    r.eager_reason = reason;
    r.retry_at = retry_at;
    r.state.store(graph_state::failed, std::memory_order_release);
  }
  r.notify_settled();
}

void plan_table::evict_to(size_t max_plans) {
  std::vector<graph_record*> ready;
  for (const auto& [key, variants] : by_key_)
    for (const auto& r : variants)
      if (r->state.load() == graph_state::ready)
        ready.push_back(r.get());
  if (ready.size() <= max_plans)
    return;
  std::sort(ready.begin(), ready.end(), [](auto* a, auto* b) {
    return a->last_used.load() < b->last_used.load();
  });
  size_t excess = ready.size() - max_plans;
  for (auto* victim : ready) {
    if (excess == 0)
      break;
    if (victim->running.load() > 0)
      continue;  // never under a running backward
    auto keep = by_id_.at(victim->id);  // alive until its key is erased
    auto& variants = by_key_[victim->key];
    by_id_.erase(victim->id);
    std::erase_if(variants, [&](const auto& r) { return r.get() == victim; });
    if (variants.empty())
      by_key_.erase(victim->key);
    --excess;
  }
}

namespace {

/// Settles records whose compile will not land (their compile is dropped)
/// and wakes the backwards waiting for them: they go to the stock engine.
void abandon(const std::vector<std::shared_ptr<graph_record>>& dropped) {
  for (const auto& r : dropped) {
    r->eager_reason = fallback_reason::compile_pending;
    r->retry_at = std::chrono::steady_clock::time_point::min();
    r->state.store(graph_state::failed);
    r->notify_settled();
  }
}

} // namespace

void plan_table::drop_pending() {
  std::vector<std::shared_ptr<graph_record>> dropped;
  {
    std::unique_lock lock(mutex_);
    for (auto& [key, variants] : by_key_)
      std::erase_if(variants, [&](const auto& r) {
        if (r->state.load() != graph_state::pending)
          return false;
        dropped.push_back(r);
        return true;
      });
    for (const auto& r : dropped)
      by_id_.erase(r->id);
  }
  abandon(dropped);
}

void plan_table::drop(graph_record& r) {
  std::shared_ptr<graph_record> dropped;
  {
    std::unique_lock lock(mutex_);
    auto found = by_id_.find(r.id);
    if (found == by_id_.end())
      return;
    dropped = found->second;
    by_id_.erase(found);
    auto variants = by_key_.find(r.key);
    if (variants != by_key_.end()) {
      std::erase(variants->second, dropped);
      if (variants->second.empty())
        by_key_.erase(variants);
    }
  }
  abandon({dropped});
}

void plan_table::clear() {
  std::vector<std::shared_ptr<graph_record>> dropped;
  {
    std::unique_lock lock(mutex_);
    for (const auto& [id, r] : by_id_)
      if (r->state.load() == graph_state::pending)
        dropped.push_back(r);
    by_key_.clear();
    by_id_.clear();
  }
  abandon(dropped);
}

size_t plan_table::plans() const {
  std::shared_lock lock(mutex_);
  size_t n = 0;
  for (const auto& [id, r] : by_id_)
    n += r->state.load() == graph_state::ready ? 1 : 0;
  return n;
}

std::vector<graph_statistics> plan_table::statistics() const {
  std::shared_lock lock(mutex_);
  std::vector<graph_statistics> out;
  for (const auto& [id, r] : by_id_) {
    graph_statistics g;
    g.id = id;
    auto s = r->state.load();
    g.state = s;
    g.nodes = r->nodes;
    g.hits = r->hits.load();
    g.pending_backwards = r->pending_backwards.load();
    g.eager_backwards = r->eager_backwards.load();
    g.compiles = r->compiles.load();
    g.compile_ms = r->compile_ms;
    if (s == graph_state::failed)
      g.fallback = r->eager_reason;
    out.push_back(std::move(g));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  return out;
}

} // namespace gradd::engine
