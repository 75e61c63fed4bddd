// The daemon link (see daemon_link.hpp). The wire's client (wire_client.hpp)
// fails every request out at once when the daemon's connection ends, and
// quits, which the link's monitor sees; a daemon that hangs is covered by
// every request's finite timeout, and a tick while requests are out lets
// the pipeline's stop settle them at once.

#include "actors/daemon_link.hpp"

#include "actors/job_layout.hpp"
#include "actors/plan_store.hpp"
#include "actors/wire_client.hpp"
#include "compiler/foreign_plan.hpp"
#include "compiler/plan.hpp"
#include "compiler/portable_key.hpp"
#include "config/daemon_address.hpp"
#include "config/log.hpp"
#include "config/token_file.hpp"

#include <caf/all.hpp>
#include <torch/version.h>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <utility>

namespace gradd::actors {

namespace {

using link_pointer = daemon_link_actor::stateful_pointer<daemon_link_state>;
using clock = std::chrono::steady_clock;

constexpr auto tick_every = std::chrono::milliseconds(20);
constexpr auto report_every = std::chrono::seconds(1);

/// Where the link is and what it talks to; copied into its handlers.
struct link {
  link_pointer self;
  std::shared_ptr<const stage_setup> setup;
  daemon_feed* feed;
  capture_actor capture;
  registry_actor registry;
  job_layout job;

  daemon_link_state& state() const { return self->state; }

  /// Whether this rank's switches to plans are agreed with the job's other
  /// ranks: async compiles in a job of several ranks (with sync compiles
  /// every rank's first backward of a structure waits for its plan).
  bool agreeing() const {
    return job.shared() && config().compile.mode == compile_mode::async;
  }
  const settings& config() const { return setup->config; }
  std::chrono::milliseconds timeout() const {
    return std::chrono::milliseconds(config().daemon.timeout_ms);
  }
  size_t max_message_bytes() const { return size_t{config().daemon.max_message_mb} << 20; }

  /// Logs `what` unless it was the last thing said.
  void say(log_level level, const std::string& what) const {
    if (state().said == what)
      return;
    state().said = what;
    log(config().logging.level, level, what);
  }

  std::string daemon_name() const {
    if (host_compile_service())
      return "the host's compile service";
    auto address = configured_daemon(config());
    return "gradd daemon at " + (address ? to_string(*address) : std::string("?"));
  }

  std::string fallback_name() const {
    return config().daemon.fallback == daemon_fallback::local ? "compiling in this process"
                                                              : "the stock engine serves";
  }

  /// The job goes on without the daemon, by daemon.fallback.
  void without_daemon(capture_job job, const std::string& why) const {
    compile_result failed;
    failed.graph_id = job.graph_id;
    if (setup->is_stopping()) {
      failed.error = make_error(errc::cancelled, "gradd is stopping");
      caf::anon_send(registry, std::move(failed));
      return;
    }
    feed->fallbacks.fetch_add(1, std::memory_order_relaxed);
    if (config().daemon.fallback == daemon_fallback::local) {
      // Compiled here, the plan is still agreed on before it serves: ranks
      // whose daemon went away meanwhile switch together once it is back,
      // or not at all.
      if (agreeing())
        hold(job.graph_id, request_key(config().passes.effective_pipeline(), job.ir));
      caf::anon_send(capture, std::move(job));
      return;
    }
    failed.error = make_error(errc::compile_failed, "daemon: " + why);
    caf::anon_send(registry, std::move(failed));
  }

  /// The daemon is gone or never came: every job waiting for it goes on
  /// without it, and it is tried again after daemon.retry_after_ms.
  void lost(const std::string& why) const {
    auto& s = state();
    s.connecting = false;
    hang_up(s.daemon);
    s.daemon = nullptr;
    s.retry_at = clock::now() + std::chrono::milliseconds(config().daemon.retry_after_ms);
    say(log_level::warning, daemon_name() + " " + why + "; " + fallback_name()
                                + " until it is back (tried again after "
                                + std::to_string(config().daemon.retry_after_ms) + " ms)");
    auto queued = std::move(s.queued);
    s.queued.clear();
    for (auto& job : queued)
      without_daemon(std::move(job), why);
    settle_out(why);
    for (const auto& [graph_id, plan] : s.held)
      no_answer(graph_id);
  }

  /// Every request out goes on without the daemon; their answers, if they
  /// still come, find nothing to settle.
  void settle_out(const std::string& why) const {
    auto out = std::move(state().out);
    state().out.clear();
    for (auto& [id, job] : out)
      without_daemon(std::move(*job), why);
  }

  void start_ticking() const {
    if (state().ticking)
      return;
    state().ticking = true;
    self->delayed_send(self, tick_every, link_tick{});
  }

  /// Holds graph `graph_id`'s plan back until the ranks agree when to
  /// switch to it (Note [Agreement across ranks]); call before the plan is
  /// published. Its backwards then make the proposals (propose).
  void hold(uint64_t graph_id, uint64_t key) const {
    state().held[graph_id] = {key, 0, {}};
    // The daemon acknowledges a renewal by itself, at once (the earlier
    // proposal hears `superseded`, or the renewal `exchanging`), so a
    // backward that waits for that waits on the daemon, never on a rank.
    auto longest_wait = std::chrono::milliseconds(config().daemon.agreement_timeout_ms);
    setup->sink->hold_for_agreement(graph_id, longest_wait);
  }

  /// No answer is on its way for graph `graph_id`: its backwards stop
  /// waiting for one (the stock engine serves them).
  void no_answer(uint64_t graph_id) const {
    setup->sink->included(graph_id, plan_sink::no_answer);
  }

  /// Proposal `retry` of graph `graph_id` was answered: the graph's held
  /// plan, or null where an answer settled it already.
  daemon_link_state::held_plan* answered(uint64_t graph_id, uint32_t retry) const {
    auto found = state().held.find(graph_id);
    if (found == state().held.end())
      return nullptr;
    found->second.unanswered.erase(retry);
    return &found->second;
  }

  /// Sends this rank's proposal for a held plan. Without a daemon, or
  /// without an answer, the plan stays held: the stock engine serves, and
  /// the backwards propose again, to the daemon that is back by then.
  void propose(uint64_t graph_id, uint64_t proposal) const {
    auto& s = state();
    auto found = s.held.find(graph_id);
    if (found == s.held.end()) {
      no_answer(graph_id);  // held by a pipeline before this one, or settled
      return;
    }
    if (!s.daemon) {
      no_answer(graph_id);
      if (!s.connecting && clock::now() >= s.retry_at)
        connect();  // the daemon this proposal needs may be back
      return;
    }
    auto& plan = found->second;
    auto retry = plan.proposals++;
    plan.unanswered[retry] = proposal;
    // A daemon cannot answer without a rank's first proposal to it, so that
    // one is taken in: after a restart too.
    if (std::exchange(plan.proposed_to, s.welcomes) != s.welcomes)
      setup->sink->included(graph_id, proposal);
    auto me = *this;
    self->request(state().daemon, std::chrono::milliseconds(config().daemon.agreement_timeout_ms),
                  agree_request{job.store, job.attempt, job.local_ranks, job.machine,
                                job.machines, plan.key, proposal, retry})
        .then(
            [me, graph_id, retry](agreed& answer) {
              if (answer.serve_from == agreed::superseded) {
                // The daemon took in the next proposal instead: the answer
                // is no earlier than that one.
                if (auto* held = me.answered(graph_id, retry))
                  if (auto next = held->unanswered.find(retry + 1); next != held->unanswered.end())
                    me.setup->sink->included(graph_id, next->second);
                return;
              }
              if (answer.serve_from == agreed::exchanging) {
                // The answer, maybe earlier, waits on the other machines:
                // the backwards go on rather than wait for them.
                if (me.answered(graph_id, retry))
                  me.no_answer(graph_id);
                return;
              }
              if (me.state().held.erase(graph_id) == 0)
                return;  // an answer to an earlier proposal settled it
              if (!me.setup->sink->agree(graph_id, answer.serve_from))
                me.say(log_level::warning,
                       "graph " + std::to_string(graph_id) + ": the agreed backward "
                           + std::to_string(answer.serve_from)
                           + " had passed when the answer came; this rank switches later");
            },
            [me, graph_id, retry](caf::error& error) {
              if (!me.answered(graph_id, retry))
                return;
              me.no_answer(graph_id);
              me.say(log_level::warning,
                     "graph " + std::to_string(graph_id) + ": no agreement yet from "
                         + me.daemon_name() + " (" + me.self->system().render(error)
                         + "); the stock engine serves it and this rank proposes again");
            });
  }

  void send(capture_job job) const {
    auto shared = std::make_shared<capture_job>(std::move(job));
    state().out[shared->graph_id] = shared;
    start_ticking();
    compile_request request{config().passes.effective_pipeline(), shared->ir};
    auto key = request_key(request);
    auto me = *this;
    self->request(state().daemon, timeout(), std::move(request))
        .then(
            [me, shared, key](compiled_plan& reply) {
              if (!me.take_back(shared))
                return;  // it went on without the daemon already
              if (auto why = compiler::check_foreign_plan(reply.ir, reply.plan, shared->ir);
                  !why.empty()) {
                me.say(log_level::warning, me.daemon_name() + " sent a plan for graph "
                                               + std::to_string(shared->graph_id)
                                               + " that cannot serve (" + why + ")");
                me.without_daemon(std::move(*shared), "the daemon's plan does not fit the graph");
                return;
              }
              me.feed->plans.fetch_add(1, std::memory_order_relaxed);
              if (me.agreeing())
                me.hold(shared->graph_id, key);
              compile_result result;
              result.graph_id = shared->graph_id;
              result.ir = std::move(reply.ir);
              result.plan = std::move(reply.plan);
              caf::anon_send(me.registry, std::move(result));
            },
            [me, shared](caf::error& error) {
              if (!me.take_back(shared))
                return;
              auto why = me.self->system().render(error);
              me.say(log_level::warning, me.daemon_name() + " did not compile graph "
                                             + std::to_string(shared->graph_id) + ": " + why
                                             + "; " + me.fallback_name() + " it");
              me.without_daemon(std::move(*shared), why);
            });
  }

  /// A job that waited for the welcome. Its miss could not read the
  /// daemon's folder yet (Note [Warm start from the daemon's cache]): the
  /// plan kept there serves it without asking the daemon; else it is sent.
  void send_queued(capture_job job) const {
    if (auto dir = feed->cache_dir.load(); dir && !dir->empty()) {
      auto key = request_key(config().passes.effective_pipeline(), job.ir);
      auto stored = load_plan_for(*dir, key, job.ir, max_message_bytes());
      if (!stored.refused.empty())
        say(log_level::warning, "plan file " + plan_file(*dir, key) + " refused ("
                                    + stored.refused + "); graph "
                                    + std::to_string(job.graph_id) + " is sent to the daemon");
      if (stored.plan) {
        feed->plans.fetch_add(1, std::memory_order_relaxed);
        caf::anon_send(registry, compile_result{job.graph_id, std::move(stored.plan->ir),
                                                std::move(stored.plan->plan), caf::error{}});
        return;
      }
    }
    send(std::move(job));
  }

  /// Removes `job` from the requests out; false if it is not there any more.
  bool take_back(const std::shared_ptr<capture_job>& job) const {
    auto found = state().out.find(job->graph_id);
    if (found == state().out.end() || found->second != job)
      return false;
    state().out.erase(found);
    return true;
  }

  /// Ends the connection of `daemon`, the wire's client; a host's own
  /// compile service is not the link's to end.
  void hang_up(const daemon_actor& daemon) const {
    if (daemon && !host_compile_service())
      caf::anon_send_exit(daemon, caf::exit_reason::user_shutdown);
  }

  /// Connects and says hello; jobs queue meanwhile.
  void connect() const {
    if (auto host = host_compile_service()) {
      state().connecting = true;
      hello(host->first, host->second);
      return;
    }
    auto address = configured_daemon(config());
    std::string token;
    try {
      token = read_token(token_file_path(config()));
    } catch (const std::exception& e) {
      lost(std::string("cannot be used: ") + e.what());
      return;
    }
    state().connecting = true;
    auto me = *this;
    // The connect blocks, so an actor on a thread of its own makes it.
    auto connector = spawn_daemon_connector(self->system(), token, max_message_bytes());
    self->request(connector, timeout(), caf::connect_atom::value, address->host, address->port)
        .then(
            [me, token](caf::actor& daemon) {
              // The connection ends with the link, whenever that is.
              me.self->attach_functor([daemon] {
                caf::anon_send_exit(daemon, caf::exit_reason::user_shutdown);
              });
              me.hello(caf::actor_cast<daemon_actor>(daemon), token);
            },
            [me](caf::error& error) {
              me.lost("cannot be reached: " + me.self->system().render(error));
            });
  }

  void hello(daemon_actor daemon, const std::string& token) const {
    const char* rank = std::getenv("RANK");
    client_hello greeting{token, GRADD_VERSION, TORCH_VERSION, static_cast<int32_t>(::getpid()),
                          rank ? std::atoi(rank) : -1};
    auto me = *this;
    self->request(daemon, timeout(), std::move(greeting))
        .then(
            [me, daemon](daemon_welcome& welcome) {
              auto& s = me.state();
              s.connecting = false;
              s.daemon = daemon;
              s.welcomes += 1;
              me.self->monitor(daemon);
              // Ranks that agree on their switches ask instead: a plan loaded
              // at a miss would serve at once, at no agreed index.
              if (!me.agreeing())
                me.feed->cache_dir.store(std::make_shared<const std::string>(welcome.cache_dir));
              me.say(log_level::info, me.daemon_name() + " compiles for this process (client "
                                          + std::to_string(welcome.client_id) + ")");
              if (!s.reporting)
                me.report();
              auto queued = std::move(s.queued);
              s.queued.clear();
              for (auto& job : queued)
                me.send_queued(std::move(job));
            },
            [me, daemon](caf::error& error) {
              me.hang_up(daemon);
              me.lost("refused this process: " + me.self->system().render(error));
            });
  }

  /// Sends this process's statistics to the daemon, and again in a second
  /// while connected.
  void report() const {
    auto& s = state();
    s.reporting = static_cast<bool>(s.daemon);
    if (!s.reporting || !s.own_statistics)
      return;
    client_report report;
    for (auto& [name, value] : s.own_statistics()) {
      report.names.push_back(std::move(name));
      report.values.push_back(value);
    }
    self->send(s.daemon, std::move(report));
    self->delayed_send(self, report_every, report_tick{});
  }

  /// Once the pipeline stops, settles the requests out at once: their
  /// timeouts would hold the stop up.
  void tick() const {
    state().ticking = false;
    if (setup->is_stopping())
      settle_out("gradd is stopping");
    if (!state().out.empty())
      start_ticking();
  }
};

std::mutex host_mutex;
std::optional<std::pair<daemon_actor, std::string>>* host_service = nullptr;  // never freed

} // namespace

void compile_with(daemon_actor service, std::string token) {
  std::lock_guard lock(host_mutex);
  if (host_service == nullptr)
    host_service = new std::optional<std::pair<daemon_actor, std::string>>;
  if (service)
    *host_service = std::make_pair(std::move(service), std::move(token));
  else
    host_service->reset();
}

std::optional<std::pair<daemon_actor, std::string>> host_compile_service() {
  std::lock_guard lock(host_mutex);
  return host_service ? *host_service : std::nullopt;
}

daemon_link_actor::behavior_type daemon_link_stage(
    link_pointer self, stage_setup setup, capture_actor capture, registry_actor registry,
    daemon_feed* feed, std::function<statistics_fields()> own_statistics) {
  self->state.own_statistics = std::move(own_statistics);
  link me{self, std::make_shared<const stage_setup>(std::move(setup)), feed,
          std::move(capture), std::move(registry), read_job_layout()};
  self->set_down_handler([me](caf::down_msg& down) {
    if (down.source == me.state().daemon.address())
      me.lost("went away: " + me.self->system().render(down.reason));
  });
  me.connect();
  return {
    [me](capture_job& job) {
      auto& s = me.state();
      if (s.daemon)
        me.send(std::move(job));
      else if (s.connecting)
        s.queued.push_back(std::move(job));
      else if (clock::now() < s.retry_at)
        me.without_daemon(std::move(job), "the daemon is away");
      else {
        s.queued.push_back(std::move(job));
        me.connect();
      }
    },
    [me](link_tick) { me.tick(); },
    [me](rank_proposal& made) { me.propose(made.graph_id, made.proposal); },
    [me](report_tick) { me.report(); },
  };
}

} // namespace gradd::actors
