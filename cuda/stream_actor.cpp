// The stream actors (see stream_actor.hpp).

#include "cuda/stream_actor.hpp"

#include "actors/actor_system.hpp"
#include "config/log.hpp"
#include "cuda/backward_graph.hpp"
#include "cuda/graph_cache.hpp"
#include "cuda/graph_pool.hpp"

#include <c10/cuda/CUDAGuard.h>
#include <caf/all.hpp>

#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>

namespace gradd::cuda {

/// A capture for a stream actor to run.
struct capture_order {
  std::shared_ptr<capture_request> request;
};

} // namespace gradd::cuda

// A local message only: it holds tensors and nodes, never serialized.
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(gradd::cuda::capture_order)

namespace gradd::cuda {

using stream_actor = caf::typed_actor<caf::reacts_to<capture_order>>;

namespace {

/// What request_capture and the actors share: the actors by stream and the
/// count of captures not settled.
struct intake {
  std::mutex mutex;
  std::condition_variable settled;
  uint64_t in_flight = 0;
  bool draining = false;
  std::map<std::pair<c10::DeviceIndex, c10::StreamId>, stream_actor> actors;

  static intake& instance() {
    static auto* the_intake = new intake();  // never destroyed, as the actor system
    return *the_intake;
  }
};

std::string structure_name(const capture_request& r) {
  return "graph " + std::to_string(r.structure);
}

/// Publishes a captured graph, evicting beyond the structure's cap.
void publish(const capture_request& r, std::shared_ptr<backward_graph> graph) {
  auto& cache = graph_cache::instance();
  auto& structure = r.graphs;
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
                           + graph->cut_names());
  std::vector<std::shared_ptr<backward_graph>> evicted;
  {
    std::lock_guard lock(structure->mutex);
    auto& slot = structure->shapes[r.shape];
    slot.graph = std::move(graph);
    // Its capture is its first use: at the clock of the last replay, it tied
    // with that graph and could be the one evicted.
    slot.last_used = ++structure->clock;
    evicted = structure->evict_beyond(r.max_graphs);
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
void fail(const capture_request& r, const std::string& why, bool out_of_memory) {
  auto& structure = r.graphs;
  {
    std::lock_guard lock(structure->mutex);
    structure->shapes.erase(r.shape);
    if (out_of_memory)
      structure->out_of_memory[r.shape] = std::chrono::steady_clock::now() + r.retry_after;
    else
      structure->plan_only = why;
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
void drop(const capture_request& r) {
  auto& structure = r.graphs;
  std::lock_guard lock(structure->mutex);
  if (auto it = structure->shapes.find(r.shape); it != structure->shapes.end() && !it->second.graph)
    structure->shapes.erase(it);
}

void settle() {
  auto& in = intake::instance();
  std::lock_guard lock(in.mutex);
  --in.in_flight;
  in.settled.notify_all();
}

/// A stream actor's own: its side stream and the pool its graphs share
/// while any is alive (Note [One pool per stream]).
struct stream_state {
  c10::DeviceIndex device = 0;
  std::optional<c10::cuda::CUDAStream> side;
  std::weak_ptr<graph_pool> pool;

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

stream_actor::behavior_type stream_stage(stream_actor::stateful_pointer<stream_state> self,
                                         c10::DeviceIndex device) {
  self->state.device = device;
  return {
    [self](capture_order& order) {
      auto& r = *order.request;
      bool draining;
      {
        std::lock_guard lock(intake::instance().mutex);
        draining = intake::instance().draining;
      }
      if (draining) {
        drop(r);
      } else {
        try {
          publish(r, backward_graph::capture(r, self->state.side_stream(),
                                             self->state.shared_pool()));
        } catch (const c10::OutOfMemoryError& e) {
          fail(r, e.what_without_backtrace(), true);
        } catch (const c10::Error& e) {
          fail(r, e.what_without_backtrace(), false);
        } catch (const std::exception& e) {
          fail(r, e.what(), false);
        }
      }
      order.request.reset();  // the recorded backward's nodes go here, off the training thread
      settle();
    },
  };
}

} // namespace

bool request_capture(std::shared_ptr<capture_request> request) {
  auto& in = intake::instance();
  stream_actor actor;
  {
    std::lock_guard lock(in.mutex);
    if (in.draining)
      return false;
    auto key = std::make_pair(request->stream.device_index(), request->stream.id());
    auto& slot = in.actors[key];
    if (!slot)  // with an argument: CAF 0.17 dereferences a null pointer for none (UBSan)
      slot = actors::process_actor_system().spawn<caf::detached>(stream_stage, key.first);
    actor = slot;
    ++in.in_flight;
  }
  caf::anon_send(actor, capture_order{std::move(request)});
  return true;
}

uint64_t captures_in_flight() {
  auto& in = intake::instance();
  std::lock_guard lock(in.mutex);
  return in.in_flight;
}

bool wait_captures(std::chrono::milliseconds timeout) {
  auto& in = intake::instance();
  std::unique_lock lock(in.mutex);
  return in.settled.wait_for(lock, timeout, [&] { return in.in_flight == 0; });
}

bool drain_captures(std::chrono::milliseconds grace) {
  {
    std::lock_guard lock(intake::instance().mutex);
    intake::instance().draining = true;
  }
  return wait_captures(grace);
}

} // namespace gradd::cuda
