// The daemon's service (see compile_service.hpp).

#include "daemon/compile_service.hpp"

#include "actors/daemon_feed.hpp"
#include "actors/plan_store.hpp"
#include "compiler/compile.hpp"
#include "compiler/lower.hpp"
#include "compiler/pass_manager.hpp"
#include "compiler/plan.hpp"
#include "compiler/portable_key.hpp"
#include "daemon/agreement.hpp"
#include "daemon/daemon_log.hpp"

#include <caf/all.hpp>
#include <torch/version.h>

#include <algorithm>
#include <chrono>
#include <thread>

namespace gradd::daemon {

namespace {

using actors::compiled_plan;
using actors::errc;
using actors::make_error;
using actors::plan_source;
using plan_promise = caf::typed_response_promise<compiled_plan>;

/// Whether a client's report is one `gradd status` can print as it is:
/// bounded, every name of [a-z0-9_.] (a rank cannot inject into JSON or
/// Prometheus text), one value per name.
bool well_formed(const actors::client_report& report) {
  if (report.names.size() != report.values.size()
      || report.names.size() > actors::max_report_names)
    return false;
  for (const auto& name : report.names)
    if (name.empty() || name.size() > 64
        || name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_.") != std::string::npos)
      return false;
  return true;
}

/// Equal strings in time that does not depend on where they differ.
bool same_secret(const std::string& a, const std::string& b) {
  unsigned char differ = a.size() != b.size();
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    differ |= static_cast<unsigned char>(a[i] ^ b[i]);
  return differ == 0;
}

/// The plan for `table` under `passes`: from cache.dir if kept there for the
/// same structure and order, else compiled. Runs on the arena; throws what
/// lowering, the passes or plan building throw.
compiled_plan compile_or_load(const settings& config, uint64_t key, const std::string& passes,
                              compiler::graph table) {
  if (!config.cache.dir.empty()) {
    auto stored = actors::load_plan_for(config.cache.dir, key, table,
                                        size_t{config.daemon.max_message_mb} << 20);
    if (stored.plan)
      return {std::move(stored.plan->ir), std::move(stored.plan->plan), plan_source::disk};
    if (!stored.refused.empty())
      log_event(config.logging.level, log_level::warning, "plan_file_refused",
                {{"file", actors::plan_file(config.cache.dir, key)}, {"why", stored.refused}});
  }
  if (config.compile.delay_ms > 0)  // the test knob, as in the process
    std::this_thread::sleep_for(std::chrono::milliseconds(config.compile.delay_ms));
  auto plan = compiler::compile(table, {passes, "graph_" + hex(key), config.logging.ir_dump_dir, {}});
  if (!config.cache.dir.empty()) {
    auto error = actors::store_plan(config.cache.dir, key, {table, plan});
    if (!error.empty())
      log_event(config.logging.level, log_level::warning, "cache_write_failed",
                {{"key", hex(key)}, {"error", error}});
  }
  return {std::move(table), std::move(plan), plan_source::compiled};
}

/// The book-keeping of one request's answer.
void answered(service_pointer self, const caf::actor_addr& client, bool without_compile) {
  auto found = self->state.clients.find(client);
  if (found == self->state.clients.end())
    return;  // gone meanwhile
  found->second.waiting -= 1;
  if (without_compile) {
    found->second.status.served_without_compile += 1;
    self->state.counts.compiles_saved += 1;
  }
}

void refuse(service_pointer self, plan_promise& promise, errc code,
            const std::string& why, const std::string& peer) {
  self->state.counts.refused += 1;
  log_event(self->state.config.logging.level, log_level::warning, "refused",
            {{"code", to_string(code)}, {"why", why}, {"client", peer}});
  promise.deliver(make_error(code, why));
}

/// Evicts the least recently used compiled plans beyond cache.max_plans.
void keep_within_bounds(service_state& s) {
  while (s.recency.size() > s.config.cache.max_plans) {
    s.entries.erase(s.recency.front());
    s.recency.pop_front();
  }
}

/// Keeps in `next` the running values of the keys a daemon reads once, at
/// its start (its address, token and wire, its arena); returns the names of
/// those `next` changed, comma-separated.
std::string keep_start_only_keys(const settings& running, settings& next) {
  std::string changed;
  auto keep = [&](const char* name, auto& value, const auto& old) {
    if (value == old)
      return;
    changed += (changed.empty() ? "" : ", ") + std::string(name);
    value = old;
  };
  keep("compile.threads", next.compile.threads, running.compile.threads);
  keep("daemon.address", next.daemon.address, running.daemon.address);
  keep("daemon.token_file", next.daemon.token_file, running.daemon.token_file);
  keep("daemon.max_message_mb", next.daemon.max_message_mb, running.daemon.max_message_mb);
  return changed;
}

void quit_if_drained(service_pointer self) {
  if (!self->state.draining || self->state.counts.in_flight > 0)
    return;
  log_event(self->state.config.logging.level, log_level::info, "drained");
  self->quit();
}

plan_promise on_compile_request(service_pointer self, actors::compile_request& request) {
  auto& s = self->state;
  // Before the promise, which takes the sender over from the message.
  auto sender = caf::actor_cast<caf::actor_addr>(self->current_sender());
  auto promise = self->make_response_promise<compiled_plan>();
  auto peer = to_string(sender);
  auto client = s.clients.find(sender);
  if (client == s.clients.end()) {
    refuse(self, promise, errc::not_welcomed, "say hello with the token first", peer);
    return promise;
  }
  if (s.draining) {
    refuse(self, promise, errc::stopping, "the daemon is stopping", peer);
    return promise;
  }
  if (request.table.nodes.size() > s.config.daemon.max_nodes
      || request.table.num_outputs > s.config.daemon.max_nodes) {
    refuse(self, promise, errc::too_busy,
           std::to_string(request.table.nodes.size()) + " nodes and "
               + std::to_string(request.table.num_outputs) + " outputs, over daemon.max_nodes",
           peer);
    return promise;
  }
  if (auto why = compiler::check_node_table(request.table); !why.empty()) {
    refuse(self, promise, errc::compile_failed, "a malformed node table: " + why, peer);
    return promise;
  }
  if (client->second.waiting >= s.config.daemon.max_requests_per_client) {
    refuse(self, promise, errc::too_busy,
           "over daemon.max_requests_per_client requests waiting", peer);
    return promise;
  }
  try {
    compiler::pass_manager check(request.passes);
  } catch (const std::exception& e) {
    refuse(self, promise, errc::compile_failed, e.what(), peer);
    return promise;
  }
  client->second.status.requests += 1;
  client->second.waiting += 1;
  s.counts.requests += 1;
  auto key = actors::request_key(request);
  auto found = s.entries.find(key);
  if (found != s.entries.end()) {
    auto& entry = found->second;
    if (!compiler::same_structure(entry.table, request.table)) {
      answered(self, sender, false);
      refuse(self, promise, errc::compile_failed, "another structure has its key", peer);
      return promise;
    }
    if (entry.plan) {
      s.recency.splice(s.recency.end(), s.recency, entry.used);
      answered(self, sender, true);
      auto reply = *entry.plan;
      reply.source = reply.source == plan_source::disk ? plan_source::disk : plan_source::cached;
      promise.deliver(std::move(reply));
    } else {
      entry.waiters.push_back({promise, sender});
    }
    return promise;
  }
  auto& entry = s.entries[key];
  entry.table = request.table;
  entry.waiters.push_back({promise, sender});
  s.counts.in_flight += 1;
  auto me = caf::actor_cast<service_actor>(self);
  auto config = s.config;
  s.arena->enqueue([me, key, config, passes = std::move(request.passes),
                    table = std::move(request.table)] {
    auto start = std::chrono::steady_clock::now();
    compile_finished done;
    done.key = key;
    try {
      done.plan = compile_or_load(config, key, passes, table);
    } catch (const std::exception& e) {
      done.error = e.what();
    }
    done.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                  .count();
    caf::anon_send(me, std::move(done));
  });
  return promise;
}

void on_compile_finished(service_pointer self, compile_finished& done) {
  auto& s = self->state;
  s.counts.in_flight -= 1;
  auto found = s.entries.find(done.key);
  if (found == s.entries.end())
    return;
  auto waiters = std::move(found->second.waiters);
  found->second.waiters.clear();
  actors::compile_event event{done.key, done.plan.has_value(),
                              done.plan ? done.plan->source : plan_source::compiled,
                              static_cast<uint32_t>(found->second.table.nodes.size()),
                              static_cast<uint32_t>(waiters.size()), done.ms, done.error};
  for (const auto& listener : s.listeners)
    self->send(listener, event);
  if (!done.plan) {
    s.counts.failed += 1;
    log_event(s.config.logging.level, log_level::warning, "compile_failed",
              {{"key", hex(done.key)}, {"error", done.error}, {"waiters", uint64_t{waiters.size()}}});
    s.entries.erase(found);  // the next request tries again
    for (auto& w : waiters) {
      answered(self, w.client, false);
      w.promise.deliver(make_error(errc::compile_failed, done.error));
    }
  } else {
    auto source = done.plan->source;
    if (source == plan_source::disk)
      s.counts.disk_loads += 1;
    else
      s.counts.compiles += 1;
    log_event(s.config.logging.level, log_level::info,
              source == plan_source::disk ? "loaded" : "compiled",
              {{"key", hex(done.key)}, {"ms", done.ms},
               {"nodes", uint64_t{done.plan->ir.nodes.size()}},
               {"waiters", uint64_t{waiters.size()}}});
    for (size_t i = 0; i < waiters.size(); ++i) {
      auto reply = *done.plan;
      bool first = i == 0;
      if (!first && source == plan_source::compiled)
        reply.source = plan_source::shared;
      answered(self, waiters[i].client, !first || source == plan_source::disk);
      waiters[i].promise.deliver(std::move(reply));
    }
    found->second.plan = std::move(done.plan);
    found->second.used = s.recency.insert(s.recency.end(), done.key);
    keep_within_bounds(s);
  }
  quit_if_drained(self);
}

caf::result<actors::daemon_welcome> on_hello(service_pointer self, actors::client_hello& hello) {
  auto& s = self->state;
  auto sender = caf::actor_cast<caf::actor_addr>(self->current_sender());
  auto peer = "pid " + std::to_string(hello.pid) + " rank " + std::to_string(hello.rank);
  auto refuse_hello = [&](errc code, const std::string& why) {
    s.counts.refused += 1;
    log_event(s.config.logging.level, log_level::warning, "refused",
              {{"code", to_string(code)}, {"why", why}, {"client", peer}});
    return make_error(code, why);
  };
  if (s.draining)
    return refuse_hello(errc::stopping, "the daemon is stopping");
  if (!same_secret(hello.token, s.token))
    return refuse_hello(errc::wrong_token, "the token is not this daemon's");
  if (hello.gradd_version != GRADD_VERSION || hello.torch_version != TORCH_VERSION)
    return refuse_hello(errc::wrong_version,
                        "this daemon is gradd " GRADD_VERSION " with torch " TORCH_VERSION
                        ", the client gradd " + hello.gradd_version + " with torch "
                            + hello.torch_version);
  auto known = s.clients.find(sender);
  if (known == s.clients.end() && s.clients.size() >= s.config.daemon.max_clients)
    return refuse_hello(errc::too_busy, "over daemon.max_clients clients");
  if (known == s.clients.end()) {
    auto& client = s.clients[sender];
    client.status = {s.next_client++, hello.pid, hello.rank, 0, 0, {}};
    self->monitor(sender);
    known = s.clients.find(sender);
    log_event(s.config.logging.level, log_level::info, "welcomed",
              {{"client", known->second.status.id}, {"pid", int64_t{hello.pid}},
               {"rank", int64_t{hello.rank}}});
  }
  return actors::daemon_welcome{known->second.status.id,
                                actors::absolute_folder(s.config.cache.dir)};
}

caf::result<actors::daemon_status> on_status(service_pointer self, actors::status_request& asked) {
  auto& s = self->state;
  if (!same_secret(asked.token, s.token)) {
    s.counts.refused += 1;
    log_event(s.config.logging.level, log_level::warning, "refused",
              {{"code", "wrong_token"}, {"why", "status with another token"}});
    return make_error(errc::wrong_token, "the token is not this daemon's");
  }
  auto status = s.counts;
  status.gradd_version = GRADD_VERSION;
  status.torch_version = TORCH_VERSION;
  status.clients = s.clients.size();
  status.structures = s.recency.size();
  for (const auto& [address, client] : s.clients)
    status.per_client.push_back(client.status);
  return status;
}

} // namespace

service_actor::behavior_type compile_service(service_pointer self, settings config,
                                             std::string token, tbb::task_arena* arena) {
  self->state.config = std::move(config);
  self->state.token = std::move(token);
  self->state.arena = arena;
  self->set_down_handler([self](caf::down_msg& down) {
    auto& listeners = self->state.listeners;
    listeners.erase(std::remove_if(listeners.begin(), listeners.end(),
                                   [&](const auto& l) { return l.address() == down.source; }),
                    listeners.end());
    auto found = self->state.clients.find(down.source);
    if (found == self->state.clients.end())
      return;
    log_event(self->state.config.logging.level, log_level::info, "client_gone",
              {{"client", found->second.status.id}, {"pid", int64_t{found->second.status.pid}}});
    self->state.clients.erase(found);
    // An agreement that waits for a rank that is gone never completes: its
    // ranks time out and serve alone, and it is dropped here.
    for (auto a = self->state.agreements.begin(); a != self->state.agreements.end();)
      a = a->second.proposals.count(down.source) ? self->state.agreements.erase(a) : std::next(a);
  });
  return {
    [self](actors::client_hello& hello) { return on_hello(self, hello); },
    [self](actors::compile_request& request) { return on_compile_request(self, request); },
    [self](actors::agree_request& request) { return on_agree(self, request); },
    [self](actors::status_request& asked) { return on_status(self, asked); },
    [self](actors::subscribe& request) {
      auto sender = caf::actor_cast<caf::actor_addr>(self->current_sender());
      if (self->state.clients.count(sender) == 0 || !request.listener)
        return;  // from a welcomed client only
      self->monitor(request.listener);
      self->state.listeners.push_back(std::move(request.listener));
    },
    [self](actors::client_report& report) {
      auto sender = caf::actor_cast<caf::actor_addr>(self->current_sender());
      auto client = self->state.clients.find(sender);
      if (client != self->state.clients.end() && well_formed(report))
        client->second.status.report = std::move(report);
    },
    [self](compile_finished& done) { on_compile_finished(self, done); },
    [self](machines_agreed& result) { on_machines_agreed(self, result); },
    [self](reload& next) {
      auto& s = self->state;
      auto kept = keep_start_only_keys(s.config, next.config);
      if (!kept.empty())
        log_event(s.config.logging.level, log_level::warning, "reload_partial",
                  {{"why", kept + " changed: they take effect at the next start"}});
      s.config = std::move(next.config);
      keep_within_bounds(s);
      log_event(s.config.logging.level, log_level::info, "reloaded", {{"source", s.config.source}});
    },
    [self](peer_refused) { self->state.counts.refused += 1; },
    [self](drain) {
      self->state.draining = true;
      log_event(self->state.config.logging.level, log_level::info, "draining",
                {{"compiles_running", self->state.counts.in_flight}});
      quit_if_drained(self);
    },
  };
}

} // namespace gradd::daemon
