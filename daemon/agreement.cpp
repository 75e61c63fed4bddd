// The daemon's side of agreement across ranks (see agreement.hpp).

#include "daemon/agreement.hpp"

#include "daemon/daemon_log.hpp"
#include "daemon/store_exchange.hpp"

#include <caf/all.hpp>

#include <algorithm>

namespace gradd::daemon {

namespace {

using actors::errc;
using actors::make_error;

/// Agreements reached that the service remembers, for proposals renewed
/// after them; beyond it, one goes (its ranks have long switched).
constexpr size_t max_agreements_kept = 65536;

/// Answers every rank of agreement `id` that the plan serves from backward
/// `serve_from` on.
void settle_agreement(service_pointer self, const agreement_id& id, uint64_t serve_from) {
  auto& s = self->state;
  auto found = s.agreements.find(id);
  auto machines = found->second.machines;
  for (auto& [rank, proposal] : found->second.proposals)
    proposal.second.deliver(actors::agreed{serve_from});
  s.counts.agreements += 1;
  if (machines > 1)
    s.counts.store_agreements += 1;
  log_event(s.config.logging.level, log_level::info, "agreed",
            {{"job", std::get<0>(id)}, {"key", hex(std::get<2>(id))},
             {"ranks_here", uint64_t{found->second.proposals.size()}},
             {"machines", uint64_t{machines}}, {"serve_from", serve_from}});
  s.agreements.erase(found);
  if (s.agreed.size() >= max_agreements_kept)
    s.agreed.erase(s.agreed.begin());
  s.agreed[id] = serve_from;
}

/// Store rounds an agreement runs at most. A renewal that comes during a
/// round is not in it; the next round takes it in, and the machines settle
/// on the first round that finds no more than the one before (so on every
/// machine alike), or on the last.
constexpr uint32_t max_store_rounds = 4;

/// One machine's part of an agreement across machines, on a thread of its
/// own: the exchange blocks until every machine has written.
void store_exchanger(caf::blocking_actor* self, store_round round, agreement_id id,
                     uint64_t round_index, service_actor service) {
  machines_agreed result{std::move(id), round_index, std::nullopt, ""};
  try {
    result.serve_from = exchange_through_store(round);
  } catch (const std::exception& error) {
    result.error = error.what();
  }
  self->send(service, std::move(result));
}

/// The largest of this machine's ranks' latest proposals, and `floor`.
uint64_t largest_here(const service_state::agreement& a, uint64_t floor) {
  for (const auto& [client, proposal] : a.proposals)
    floor = std::max(floor, proposal.first);
  return floor;
}

/// Hands this machine's largest proposal to the next store round.
void start_store_round(service_pointer self, const agreement_id& id,
                       service_state::agreement& a, uint64_t largest) {
  a.exchanging = self->state.store_rounds[id]++;
  a.rounds += 1;
  store_round round{std::get<0>(id),
                    store_prefix(std::get<1>(id), std::get<2>(id), *a.exchanging),
                    a.machine,
                    a.machines,
                    largest,
                    std::chrono::milliseconds(self->state.config.daemon.agreement_timeout_ms)};
  self->spawn(store_exchanger, std::move(round), id, *a.exchanging,
              caf::actor_cast<service_actor>(self));
}

} // namespace

/// A rank's proposal. Once all the job's ranks on this machine proposed for
/// the key, every proposal hears the largest of each rank's latest, of this
/// machine's or, on several machines, of all (Note [Agreement across ranks]).
caf::typed_response_promise<actors::agreed> on_agree(service_pointer self,
                                                    actors::agree_request& request) {
  auto& s = self->state;
  auto sender = caf::actor_cast<caf::actor_addr>(self->current_sender());
  auto promise = self->make_response_promise<actors::agreed>();
  if (s.clients.count(sender) == 0) {
    s.counts.refused += 1;
    promise.deliver(make_error(errc::not_welcomed, "say hello with the token first"));
    return promise;
  }
  if (request.local_ranks == 0 || request.machine >= request.machines) {
    s.counts.refused += 1;
    promise.deliver(make_error(errc::no_agreement, "a job layout that cannot be"));
    return promise;
  }
  agreement_id id{request.job, request.attempt, request.key};
  if (auto decided = s.agreed.find(id); decided != s.agreed.end()) {
    if (request.retry > 0) {
      promise.deliver(actors::agreed{decided->second});
      return promise;
    }
    s.agreed.erase(decided);  // a first proposal: the structure's plan is new again (a reset)
  }
  auto& a = s.agreements[id];
  if (a.exchanging) {
    // The round under way may settle below this proposal: the rank hears
    // the answer with its earlier one, and a next round takes this in.
    if (auto rank = a.proposals.find(sender); rank != a.proposals.end())
      rank->second.first = std::max(rank->second.first, request.proposal);
    promise.deliver(actors::agreed{actors::agreed::exchanging});
    return promise;
  }
  auto& latest = a.proposals[sender];
  if (latest.second.pending())  // taken in instead, which the rank hears
    latest.second.deliver(actors::agreed{actors::agreed::superseded});
  latest = {request.proposal, promise};
  a.machine = request.machine;
  a.machines = request.machines;
  if (a.proposals.size() < request.local_ranks)
    return promise;
  if (request.machines == 1)
    settle_agreement(self, id, largest_here(a, 0));
  else
    start_store_round(self, id, a, largest_here(a, 0));
  return promise;
}

void on_machines_agreed(service_pointer self, machines_agreed& result) {
  auto& s = self->state;
  auto found = s.agreements.find(result.id);
  bool current = found != s.agreements.end() && found->second.exchanging == result.round;
  if (!result.serve_from)
    log_event(s.config.logging.level, log_level::warning, "no_agreement",
              {{"job", std::get<0>(result.id)}, {"key", hex(std::get<2>(result.id))},
               {"why", result.error}});
  if (!current)
    return;  // dropped meanwhile: a rank of it went away
  if (result.serve_from) {
    auto& a = found->second;
    auto found_largest = *result.serve_from;
    if (a.last_round == found_largest || a.rounds >= max_store_rounds) {
      settle_agreement(self, result.id, found_largest);
      return;
    }
    a.last_round = found_largest;
    start_store_round(self, result.id, a, largest_here(a, found_largest));
    return;
  }
  for (auto& [rank, proposal] : found->second.proposals)
    proposal.second.deliver(make_error(errc::no_agreement, result.error));
  s.agreements.erase(found);
}

} // namespace gradd::daemon
