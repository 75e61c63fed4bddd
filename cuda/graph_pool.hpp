#pragma once

// The memory pool that the CUDA graphs captured by one stream actor share,
// and the turn a launch of one of them takes in it (Note [One pool per
// stream], graph_pool.cpp).

#include <c10/core/Allocator.h>

#include <atomic>
#include <cstddef>
#include <memory>

namespace gradd::cuda {

class backward_graph;
class lent_gradients;

/// A private pool of the caching allocator that graphs are captured into
/// one after another. It goes with the last graph that holds it.
class graph_pool : public std::enable_shared_from_this<graph_pool> {
public:
  /// A new pool on `device`.
  static std::shared_ptr<graph_pool> make(c10::DeviceIndex device);

  /// Takes the memory it counted out of graph_counters::bytes.
  ~graph_pool();

  graph_pool(const graph_pool&) = delete;
  graph_pool& operator=(const graph_pool&) = delete;

  c10::MempoolId_t id() const noexcept { return id_; }

  /// Counts the pool's device memory into graph_counters::bytes and returns
  /// how much it grew since the last count. Call after a capture into it.
  size_t recount();

  /// The pool's memory for one user at a time: the launches of one graph
  /// and what reads their outputs before another graph's launch may
  /// overwrite them. Lets go when destroyed.
  class turn {
  public:
    turn() = default;
    turn(turn&& other) noexcept = default;
    turn& operator=(turn&& other) noexcept;
    ~turn();
    explicit operator bool() const noexcept { return pool_ != nullptr; }

  private:
    friend class graph_pool;
    explicit turn(std::shared_ptr<graph_pool> pool) : pool_(std::move(pool)) {}
    std::shared_ptr<graph_pool> pool_;
  };

  /// The turn if no one holds it, the calling thread included; an empty
  /// turn otherwise. Never waits.
  turn try_take();

  /// The turn, once whoever holds it lets go.
  turn take();

  // Read and written under a turn only.
  /// The graph launched last: the next launch comes after it on the GPU.
  std::weak_ptr<backward_graph> last_launched;
  /// The gradients handed out last: the only ones a launch may have to
  /// take back first (Note [Lent gradients]). Held past their graph's
  /// eviction, till the next launch takes them back.
  std::shared_ptr<lent_gradients> last_lent;

private:
  explicit graph_pool(c10::DeviceIndex device);
  void let_go() noexcept;

  c10::DeviceIndex device_;
  c10::MempoolId_t id_;
  std::atomic<bool> taken_{false};
  size_t counted_ = 0;  ///< bytes in graph_counters::bytes
};

} // namespace gradd::cuda
