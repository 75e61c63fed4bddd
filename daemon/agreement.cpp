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
  auto& latest = a.proposals[sender];
  if (latest.second.pending())
    latest.second.deliver(actors::agreed{actors::agreed::superseded});
  latest = {request.proposal, promise};
  a.machines = request.machines;
  if (a.proposals.size() < request.local_ranks || a.exchanging)
    return promise;
  uint64_t largest = 0;
  for (const auto& [client, proposal] : a.proposals)
    largest = std::max(largest, proposal.first);
  if (request.machines == 1) {
    settle_agreement(self, id, largest);
    return promise;
  }
  a.exchanging = s.store_rounds[id]++;
  store_round round{request.job,
                    store_prefix(request.attempt, request.key, *a.exchanging),
                    request.machine,
                    request.machines,
                    largest,
                    std::chrono::milliseconds(s.config.daemon.agreement_timeout_ms)};
  self->spawn(store_exchanger, std::move(round), id, *a.exchanging,
              caf::actor_cast<service_actor>(self));
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
    settle_agreement(self, result.id, *result.serve_from);
    return;
  }
  for (auto& [rank, proposal] : found->second.proposals)
    proposal.second.deliver(make_error(errc::no_agreement, result.error));
  s.agreements.erase(found);
}

} // namespace gradd::daemon
