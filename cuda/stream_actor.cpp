// The stream actors (see stream_actor.hpp).

#include "cuda/stream_actor.hpp"

#include "actors/actor_system.hpp"
#include "config/log.hpp"
#include "cuda/backward_graph.hpp"
#include "cuda/graph_cache.hpp"
#include "cuda/graph_hit.hpp"
#include "cuda/graph_pool.hpp"

#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <caf/all.hpp>

#include <atomic>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

namespace gradd::cuda {

namespace {

using capture_atom = caf::atom_constant<caf::atom("capture")>;
using idle_atom = caf::atom_constant<caf::atom("idle")>;

/// Captures the pending capture of (structure, shape) and answers whether
/// it published a graph.
using stream_actor = caf::typed_actor<caf::replies_to<capture_atom, uint64_t, uint64_t>::with<bool>>;

/// The stream actors' door: hands (structure, shape, device, stream) to the
/// actor of that stream, spawned on first use, and answers `idle` once no
/// capture is in flight.
using intake_actor =
    caf::typed_actor<caf::reacts_to<capture_atom, uint64_t, uint64_t, int32_t, int64_t>,
                     caf::replies_to<idle_atom>::with<bool>>;

/// Captures requested and not settled: request_capture adds, the intake
/// settles. Read without an actor (captures_in_flight, process exit).
std::atomic<uint64_t> in_flight{0};
/// Set once at process exit: no new capture, pending ones dropped.
std::atomic<bool> draining{false};

std::string structure_name(const capture_request& r) {
  return "graph " + std::to_string(r.structure);
}

/// Publishes a captured graph, evicting beyond the structure's cap.
void publish(const capture_request& r, structure_graphs& structure,
             std::shared_ptr<backward_graph> graph) {
  auto& cache = graph_cache::instance();
  auto kib = [](size_t bytes) { return std::to_string(bytes >> 10) + " KiB"; };
  auto held = std::to_string(graph->node_count()) + " nodes, " + kib(graph->bytes())
              + ": the stream's pool grew " + kib(graph->pool_bytes()) + ", copies of inputs "
              + kib(graph->bytes() - graph->pool_bytes()) + "; " + kib(graph->bound_bytes())
              + " of inputs read in place"
              + (graph->live_nodes() == 0
                     ? ""
                     : "; " + std::to_string(graph->live_nodes()) + " nodes called live around it")
              + (graph->pieces() == 1
                     ? ""
                     : "; " + std::to_string(graph->pieces()) + " pieces, cut at "
                           + graph->cut_names())
              + (graph->sharing().empty() ? "" : "; " + graph->sharing());
  std::vector<std::shared_ptr<backward_graph>> evicted;
  {
    std::lock_guard lock(structure.mutex);
    // Its capture is its first use: at the clock of the last replay, it tied
    // with that graph and could be the one evicted.
    structure.mark_used(*graph);
    structure.shapes[r.shape].graph = std::move(graph);
    evicted = structure.evict_beyond(r.max_graphs);
    structure.publish();
  }
  cache.counters.captures.fetch_add(1);
  cache.counters.evictions.fetch_add(evicted.size());
  log(r.level, log_level::info,
      structure_name(r) + ": CUDA graph captured for a shape (" + held + ")"
          + (evicted.empty() ? "" : ", " + std::to_string(evicted.size()) + " evicted"));
}

/// A capture that failed. Running out of device memory is a matter of the
/// moment and of the shape (a larger batch): that shape stays on plans for
/// fallback.retry_after_ms and the structure's other shapes keep their
/// graphs. Anything else (a host sync, an op a graph cannot hold) is the
/// structure's: it stays on plans, said once.
void fail(const capture_request& r, structure_graphs& structure, const std::string& why,
          bool out_of_memory) {
  {
    std::lock_guard lock(structure.mutex);
    structure.shapes.erase(r.shape);
    if (out_of_memory)
      structure.out_of_memory[r.shape] = std::chrono::steady_clock::now() + r.retry_after;
    else
      structure.plan_only = why;
    structure.publish();
  }
  graph_cache::instance().counters.capture_failures.fetch_add(1);
  log(r.level, log_level::warning,
      structure_name(r)
          + (out_of_memory ? ": a shape stays on plans for " + std::to_string(r.retry_after.count())
                                 + " ms, its CUDA graph capture ran out of memory: "
                           : " stays on plans: its CUDA graph capture failed: ")
          + why);
}

/// Drops the pending slot of a capture that will not run.
void drop(const capture_request& r, structure_graphs& structure) {
  std::lock_guard lock(structure.mutex);
  if (auto it = structure.shapes.find(r.shape); it != structure.shapes.end() && !it->second.graph)
    structure.shapes.erase(it);
}

/// The leaf buffers a new graph of `structure` captured into `pool` writes
/// its gradients into (Note [Outputs shared across shapes]): those of the
/// first graph of the structure found in that pool (the graphs that share
/// write the same ones).
std::vector<at::Tensor> kin_of(const structure_graphs& structure, const graph_pool& pool) {
  for (const auto& [shape, published] : structure.published()->shapes)
    if (auto kin = published.graph->kin_buffers(pool); !kin.empty())
      return kin;
  return {};
}

/// A stream actor's own: its side stream and the pool its graphs share
/// while any is alive (Note [One pool per stream]).
struct stream_state {
  c10::DeviceIndex device = 0;
  std::optional<c10::cuda::CUDAStream> side;
  std::weak_ptr<graph_pool> pool;
  /// A capture ran out of memory: the next one gives the allocator's cached
  /// blocks back to the device first. Its eager work on the training stream
  /// reuses that stream's blocks, and the allocator frees none during a
  /// capture, so a pool could not grow into memory cached for the training
  /// stream (emptyCache on this thread leaves other threads' captures be:
  /// Note [Device synchronizes during captures]).
  bool release_cache = false;

  /// Taken on the actor's thread: the stream pool's first use creates
  /// every stream of it, 5-6 ms on a Hopper GPU that the training thread's
  /// first recorded backward waited for when it was taken there.
  c10::cuda::CUDAStream side_stream() {
    if (!side)
      side = c10::cuda::getStreamFromPool(false, device);
    return *side;
  }

  std::shared_ptr<graph_pool> shared_pool() {
    auto shared = pool.lock();
    if (!shared)
      pool = shared = graph_pool::make(device);
    return shared;
  }
};

/// A capture taken from its slot, and the structure it lands in.
struct pending_capture {
  std::shared_ptr<structure_graphs> graphs;
  std::shared_ptr<capture_request> request;  ///< null where none waited (reset() dropped it)
};

pending_capture take_pending(uint64_t structure, uint64_t shape) {
  pending_capture taken{graph_cache::instance().find(structure), nullptr};
  if (taken.graphs) {
    std::lock_guard lock(taken.graphs->mutex);
    if (auto it = taken.graphs->shapes.find(shape); it != taken.graphs->shapes.end())
      taken.request = std::move(it->second.pending);
  }
  return taken;
}

stream_actor::behavior_type stream_stage(stream_actor::stateful_pointer<stream_state> self,
                                         c10::DeviceIndex device) {
  self->state.device = device;
  return {
    [self](capture_atom, uint64_t structure, uint64_t shape) {
      // The recorded backward's nodes and saved variables go with `request`,
      // here, off the training thread.
      auto [graphs, request] = take_pending(structure, shape);
      if (!request)
        return false;
      auto& r = *request;
      // Its work runs on the training stream: not into the user's capture of
      // it; the shape's next backward asks again.
      if (draining.load() || stream_capturing(r.stream)) {
        drop(r, *graphs);
        return false;
      }
      try {
        if (std::exchange(self->state.release_cache, false))
          c10::cuda::CUDACachingAllocator::emptyCache();
        auto pool = self->state.shared_pool();
        auto kin = kin_of(*graphs, *pool);
        publish(r, *graphs,
                backward_graph::capture(r, self->state.side_stream(), std::move(pool),
                                        std::move(kin)));
        return true;
      } catch (const c10::OutOfMemoryError& e) {
        self->state.release_cache = true;
        fail(r, *graphs, e.what_without_backtrace(), true);
      } catch (const c10::Error& e) {
        fail(r, *graphs, e.what_without_backtrace(), false);
      } catch (const std::exception& e) {
        fail(r, *graphs, e.what(), false);
      }
      return false;
    },
  };
}

struct intake_state {
  std::map<std::pair<c10::DeviceIndex, c10::StreamId>, stream_actor> actors;
  std::vector<caf::typed_response_promise<bool>> awaiting_idle;
};

/// `settled`: the count of captures in flight, which it settles.
intake_actor::behavior_type intake_stage(intake_actor::stateful_pointer<intake_state> self,
                                         std::atomic<uint64_t>* settled) {
  auto settle = [self, settled] {
    if (settled->fetch_sub(1) == 1) {
      for (auto& promise : self->state.awaiting_idle)
        promise.deliver(true);
      self->state.awaiting_idle.clear();
    }
  };
  return {
    [self, settle](capture_atom, uint64_t structure, uint64_t shape, int32_t device,
                   int64_t stream) {
      auto& actor = self->state.actors[{static_cast<c10::DeviceIndex>(device), stream}];
      if (!actor)  // with an argument: CAF 0.17 dereferences a null pointer for none (UBSan)
        actor = self->system().spawn<caf::detached>(stream_stage,
                                                    static_cast<c10::DeviceIndex>(device));
      // Captures take seconds where modules load; each stream actor answers
      // every order it takes.
      self->request(actor, caf::infinite, capture_atom::value, structure, shape)
          .then([settle](bool) { settle(); }, [settle](caf::error&) { settle(); });
    },
    [self, settled](idle_atom) -> caf::result<bool> {
      if (settled->load() == 0)
        return true;
      self->state.awaiting_idle.push_back(self->make_response_promise<bool>());
      return caf::delegated<bool>();
    },
  };
}

intake_actor intake() {
  // With an argument: CAF 0.17 dereferences a null pointer for none (UBSan).
  static auto the_intake = actors::process_actor_system().spawn(intake_stage, &in_flight);
  return the_intake;
}

} // namespace

bool request_capture(structure_graphs& graphs, std::shared_ptr<capture_request> request) {
  if (draining.load())
    return false;
  // The order names the request; the request waits in the slot reserved
  // for its shape, where the stream actor takes it (or reset() drops it).
  uint64_t structure = request->structure;
  uint64_t shape = request->shape;
  int32_t device = request->stream.device_index();
  int64_t stream = request->stream.id();
  {
    std::lock_guard lock(graphs.mutex);
    graphs.shapes[shape].pending = std::move(request);
  }
  in_flight.fetch_add(1);
  caf::anon_send(intake(), capture_atom::value, structure, shape, device, stream);
  return true;
}

uint64_t captures_in_flight() {
  return in_flight.load();
}

bool wait_captures(std::chrono::milliseconds timeout) {
  if (in_flight.load() == 0)
    return true;
  bool idle = false;
  caf::scoped_actor self{actors::process_actor_system()};  // fresh: a late answer stays in it
  self->request(intake(), timeout, idle_atom::value)
      .receive([&](bool answer) { idle = answer; }, [](caf::error&) {});
  return idle;
}

bool drain_captures(std::chrono::milliseconds grace) {
  draining = true;
  auto until = std::chrono::steady_clock::now() + grace;
  while (in_flight.load() != 0) {
    if (std::chrono::steady_clock::now() >= until)
      return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

} // namespace gradd::cuda
