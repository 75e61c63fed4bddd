#pragma once

// One backward of one structure at one shape, as a CUDA graph.
//
// The graph is captured from a functional recording (functional/)
// whose lifted inputs are static buffers: the parameters themselves (their
// addresses do not change in a training loop) and gradd-owned copies of
// everything else. A replay points the graph at the large live inputs
// (Note [Bound inputs]), copies the others into their copies with one
// batched launch, replays, and hands out the gradients the graph wrote,
// without cloning them (Note [Lent gradients]). The graphs one stream
// actor captures share one memory pool (Note [One pool per stream]). A
// backward with nodes a graph cannot hold (hooks, Python Functions) is
// captured as pieces, those nodes called live between them (Note
// [Piecewise graphs]).

#include "cuda/batched_copy.hpp"
#include "cuda/bound_inputs.hpp"
#include "cuda/graph_pool.hpp"
#include "cuda/lent_gradients.hpp"
#include "cuda/lift_alone.hpp"
#include "functional/graph.hpp"
#include "functional/recording.hpp"
#include "gradd/settings.hpp"

#include <ATen/cuda/CUDAEvent.h>
#include <c10/core/StorageImpl.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/autograd/function.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <typeinfo>
#include <vector>

namespace torch::autograd {
struct GraphTask;
}

namespace gradd::functional {
struct program_outputs;
}

namespace gradd::cuda {

class capture_workspaces;  // blas_workspace.hpp
struct expected_outputs;  // what a binding trial's outputs must be (input_binding.cpp)

/// What the stream actor captures a graph from: a backward of the structure
/// at this shape that a plan served, its saved variables kept for the
/// recording, and its state as lifted on its own thread before it ran.
/// Destroying the request releases those saved variables (unless the
/// backward was asked to retain its graph).
struct capture_request {
  capture_request(c10::cuda::CUDAStream stream, functional::graph backward)
      : stream(stream), backward(std::move(backward)) {}
  ~capture_request();
  capture_request(const capture_request&) = delete;
  capture_request& operator=(const capture_request&) = delete;

  uint64_t structure = 0;  ///< the plan table's record id
  uint64_t shape = 0;      ///< the shape key of the backward
  c10::cuda::CUDAStream stream;  ///< the stream it ran and graphs replay on
  /// Its nodes (walk order) and node table; `root` keeps the nodes alive.
  functional::graph backward;
  std::shared_ptr<torch::autograd::Node> root;
  std::shared_ptr<torch::autograd::GraphTask> task;  ///< its TLS and exec info
  std::shared_ptr<torch::dynamo::autograd::AutogradCompilerCall> lifted;
  /// Per node (walk order), what each node the graph is cut at returned
  /// when the plan ran (functional::cut_at); empty where there is none.
  std::vector<torch::autograd::variable_list> cut_outputs;
  size_t num_outputs = 0;   ///< autograd::grad outputs
  bool keep_graph = false;  ///< retain_graph: its saved variables stay
  std::string passes;      ///< passes.pipeline, run on the recording first
  uint32_t delay_ms = 0;   ///< compile.delay_ms: the capture waits this long first
  uint32_t max_graphs = 8; ///< cuda_graphs.max_graphs of the structure
  /// fallback.retry_after_ms: a shape out of memory is captured again after this
  std::chrono::milliseconds retry_after{60000};
  /// Inputs the graph copies instead of reading them where they live (Note
  /// [Bound inputs]): those an earlier graph of this shape read through a
  /// kernel whose nodes the driver refused new arguments (Known gaps,
  /// design.md). Sorted.
  std::vector<uint32_t> copied;
  log_level level = log_level::warning;
};

/// A captured graph and its static buffers.
class backward_graph : public std::enable_shared_from_this<backward_graph> {
public:
  /// Records the request's backward on its stream (functional::record_lifted),
  /// copies its inputs into static buffers, runs the pass pipeline on the
  /// recording, warms up (modules, allocator), then captures the recording
  /// on `side` in thread-local capture mode into `pool`, and instantiates;
  /// cuBLAS calls use the request stream's workspace throughout (Note [One
  /// cuBLAS workspace per training stream]). Not through at::cuda::CUDAGraph: its
  /// capture puts the default CUDA generator into capture mode for the whole
  /// process, so a training thread drawing random numbers meanwhile (dropout)
  /// fails ("Offset increment outside graph capture"). `kin`: the leaf
  /// buffers of a graph of the same structure in `pool` (kin_buffers()),
  /// which this one writes its gradients into where they agree (Note
  /// [Outputs shared across shapes]); empty for none. Throws
  /// std::runtime_error naming what failed (an op that synchronizes with
  /// the host, one that is not capturable, a node that cannot be recorded).
  static std::shared_ptr<backward_graph> capture(const capture_request& request,
                                                 c10::cuda::CUDAStream side,
                                                 std::shared_ptr<graph_pool> pool,
                                                 std::vector<at::Tensor> kin);

  /// Waits for the last replay, then lets the graph and its share of the
  /// pool go. Gradients it lent and someone holds stay where they are
  /// (Note [Lent gradients]).
  ~backward_graph();

  /// Whether `live` (the lifted tensors of a backward) can replay this graph.
  enum class fit : uint8_t {
    fits,
    parameter_moved,  ///< a parameter is at another address: recapture
    different,        ///< a tensor is missing or laid out otherwise: the plan serves it
  };
  fit fit_of(const std::vector<at::Tensor>& live) const;

  /// Its structure's clock at its last replay or its capture, for
  /// least-recently-used eviction; set by hits without a lock.
  void mark_used(uint64_t tick) noexcept { last_used_.store(tick, std::memory_order_relaxed); }
  uint64_t last_used() const noexcept { return last_used_.load(std::memory_order_relaxed); }

  /// Whether it may replay on `stream`: one that reads the cuBLAS workspace
  /// of the stream it was captured for replays there only (Note [One cuBLAS
  /// workspace per training stream]).
  bool launches_on(c10::cuda::CUDAStream stream) const noexcept {
    return !workspace_stream_ || *workspace_stream_ == stream.stream();
  }

  /// A launch made before the backward's lift (Note [Early launch]). It
  /// holds the pool's turn until replay() confirms or redoes it; one
  /// dropped unconfirmed counts as a lost bet.
  class early_launch {
  public:
    explicit early_launch(graph_pool::turn turn) : turn_(std::move(turn)) {}
    early_launch(early_launch&&) noexcept = default;
    early_launch& operator=(early_launch&&) noexcept = default;
    ~early_launch();

  private:
    friend class backward_graph;
    graph_pool::turn turn_;
  };

  /// Launches the graph on `stream` before the backward of `backward` is
  /// lifted, as the last replay left it but for the integer inputs it binds,
  /// which it reads where the one node holding each, lifted alone, has
  /// them; if Note [Early launch] allows it. Nullopt, launching nothing,
  /// otherwise.
  std::optional<early_launch> launch_early(c10::cuda::CUDAStream stream,
                                           const backward_nodes& backward);

  /// How a replay serves its backward.
  struct replay_options {
    grad_hand_out hand_out = grad_hand_out::borrow;  ///< cuda_graphs.hand_out
    bool keep_graph = false;  ///< retain_graph: the leaves it calls live keep their state
    /// cuda_graphs.early_launch: note whether the next backward may launch
    /// before its lift.
    bool notes_bets = false;
  };

  /// Replays on `stream` for the live lifted tensors (which fit), lifted
  /// from `backward`, and leaves the gradients where the stock engine
  /// would: `.grad` of each leaf (accumulated as the stock engine does),
  /// the leaves with hooks called on theirs in the stock engine's order
  /// (Note [Live leaves]), and the `autograd::grad` results returned. With
  /// `early`, this graph's launch before the lift, it launches again only
  /// if an input moved since. Returns nullopt, doing nothing, if a graph of
  /// its pool is in use right now (by this thread too), or if the driver
  /// refused to point it at moved inputs (rebind_refusal()). What a leaf's
  /// hook raises propagates, after the gradients before it were handed out.
  std::optional<torch::autograd::variable_list> replay(const std::vector<at::Tensor>& live,
                                                       const backward_nodes& backward,
                                                       c10::cuda::CUDAStream stream,
                                                       const replay_options& options,
                                                       std::optional<early_launch> early);

  /// Of the backward's nodes, those a replay calls live: the AccumulateGrad
  /// nodes with hooks (Note [Live leaves]) and the nodes it is cut at (Note
  /// [Piecewise graphs]).
  size_t live_nodes() const noexcept { return live_nodes_; }

  /// The pieces it is captured as: one more than the nodes it is cut at.
  size_t pieces() const noexcept { return cuts_.size() + 1; }

  /// What a later graph of its structure captured into `pool` writes its
  /// leaf gradients into (Note [Outputs shared across shapes]): this one's
  /// leaf buffers, by the order it writes them; none where it lies in
  /// another pool or is cut into pieces.
  std::vector<at::Tensor> kin_buffers(const graph_pool& pool) const;

  /// For the log: how many of its leaf gradients it writes into an older
  /// graph's buffers; "" where none was offered.
  const std::string& sharing() const noexcept { return sharing_; }

  /// The nodes it is cut at, each by walk-order number and type and why:
  /// `3 (MulBackward0: hooks), 7 (PyNode: a Python Function), 9
  /// (ScaledDotProductEfficientAttentionBackward0: state on the host)`.
  const std::string& cut_names() const noexcept { return cut_names_; }

  /// The graph's nodes (kernels, copies, memsets), as the driver counts them.
  size_t node_count() const;

  /// Device memory the graph added: copies of inputs and what its pool grew.
  size_t bytes() const noexcept { return bytes_; }

  /// Of bytes(), what its pool grew by at its capture: the buffers its
  /// kernels write, less what graphs captured before it left free.
  size_t pool_bytes() const noexcept { return pool_bytes_; }

  /// Bytes of inputs a replay reads where they live instead of copying.
  size_t bound_bytes() const noexcept { return bound_bytes_; }

  /// The node whose new arguments the driver first refused at a replay;
  /// nullptr while it refused none. Such a graph cannot follow its inputs
  /// any more. Takes no lock: a busy graph's caller must not wait.
  const std::string* rebind_refusal() const noexcept;

  /// Where rebind_refusal() is not null: the inputs read by that node's
  /// kernel (bound_inputs::refused_inputs), which the shape's next graph
  /// copies.
  const std::vector<uint32_t>& refused_inputs() const noexcept { return rebind_refused_inputs_; }

private:
  /// A leaf's gradient as the graph writes it.
  struct leaf_gradient {
    uint32_t leaf = 0;   ///< lifted position of the leaf variable
    uint32_t node = 0;   ///< its AccumulateGrad node, in walk order
    bool live = false;   ///< that node has hooks: the replay calls it (Note [Live leaves])
    uint32_t position = 0;  ///< its place among the graph's leaf outputs, in the order it writes them
    uint32_t piece = 0;  ///< the piece that writes it (Note [Piecewise graphs])
    at::Tensor buffer;   ///< the graph's output, in its pool
    bool exclusive = false;  ///< no other output or input is this very tensor
    size_t storage = 0;  ///< its lent storage (lent_gradients::lend)
  };

  /// A tensor in the graph's memory, by where it lies after the pieces
  /// before a cut ran: holding the tensor would keep its memory from the
  /// allocations of the pieces after it.
  struct placed_value {
    uint32_t value = 0;  ///< the recording's value it holds
    const void* data = nullptr;
    std::vector<int64_t> sizes;
    std::vector<int64_t> strides;
    at::ScalarType dtype = at::kFloat;
  };
  /// A node the graph is cut at, and the piece after it (Note [Piecewise
  /// graphs]).
  struct cut {
    uint32_t node = 0;  ///< walk order
    uint32_t op = 0;    ///< its call_node op's position in recording_
    /// Its input gradients as the piece before leaves them; nullopt where
    /// none arrived.
    std::vector<std::optional<placed_value>> inputs;
    /// The other values in flight past it, but the graph inputs: what the
    /// rest of the backward runs on where it runs eagerly.
    std::vector<placed_value> in_flight;
    /// Where the piece after it reads its outputs, laid out as the plan's
    /// run of it returned them.
    std::vector<at::Tensor> outputs;
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
  };

  backward_graph() = default;
  /// The roles of a recording's ops the capture keeps: per accumulate_grad
  /// op, in op order (the order of the leaf gradients the capture
  /// collects), its node and the piece writing it; the values the graph
  /// inputs define.
  struct op_roles {
    std::vector<uint32_t> leaf_nodes;
    std::vector<uint32_t> leaf_pieces;
    std::vector<bool> is_input;
  };
  /// At capture: the static buffers of the lifted tensors `lifted`.
  void take_inputs(const std::vector<at::Tensor>& lifted);
  /// At capture: the roles of `recording`'s ops (nodes in `table`), and
  /// the nodes it is cut at (cuts_, in op order), each with where the piece
  /// after it reads its outputs (Note [Piecewise graphs]).
  op_roles read_ops(const functional::recording& recording, const compiler::graph& table,
                    const capture_request& request);
  /// At capture: the leaf gradients and results the capture wrote, the
  /// leaves in the order they are handed out.
  void take_leaves(functional::program_outputs& outputs, const op_roles& roles,
                   const compiler::graph& table);
  /// At capture: its bytes (bytes(), pool_bytes()), with `scratch_bytes`,
  /// into the graph counters.
  void count_bytes(size_t scratch_bytes);
  /// A copy of `v`, laid out as it is, on the current stream.
  at::Tensor copy_of(const placed_value& v) const;
  /// `v` as a placed_value of value `value`.
  static placed_value place(uint32_t value, const at::Tensor& v);
  /// Calls cut `c`'s node live on `stream` with copies of its inputs
  /// (Note [Piecewise graphs]); where its outputs fit the piece after it,
  /// copies them in and launches that piece, returning nullopt; returns
  /// them otherwise.
  std::optional<torch::autograd::variable_list> cross(cut& c, const backward_nodes& backward,
                                                      c10::cuda::CUDAStream stream,
                                                      const replay_options& options);
  /// Where cut `c`'s node returned `outputs` that do not fit the piece
  /// after it: runs the rest of the backward eagerly on `stream` from the
  /// recording, the leaves in it handed out and the cuts called as they
  /// come; returns the `autograd::grad` results.
  torch::autograd::variable_list finish_eagerly(const cut& c, torch::autograd::variable_list outputs,
                                                const std::vector<at::Tensor>& live,
                                                const backward_nodes& backward,
                                                c10::cuda::CUDAStream stream,
                                                const replay_options& options);
  /// Returns whether it queued work that reads the buffer (an addition or
  /// copy into `.grad`).
  bool hand_out(leaf_gradient& g, const at::Tensor& variable, grad_hand_out mode);
  /// Whether hand_out gives `variable` the graph's buffer itself as its
  /// `.grad`, queuing no work on the device: what the stock engine's steal
  /// leaves.
  bool lends_alone(const leaf_gradient& g, const at::Tensor& variable, grad_hand_out mode) const;
  /// Calls `g`'s AccumulateGrad node `node` on the gradient as the stock
  /// engine would, hooks and all (Note [Live leaves]).
  void call_live(leaf_gradient& g, torch::autograd::Node& node, const replay_options& options);
  /// After the first piece's launch on `stream`: every leaf of `backward`
  /// (whose lifted tensors are `live`) in the stock engine's order on
  /// leaf_stream_, each after its gradient is ready, the hooked ones called
  /// live, and each cut crossed once the leaves before it are (Note [Live
  /// leaves], Note [Piecewise graphs]); then `stream` waits for them.
  /// Returns the `autograd::grad` results where a cut's node returned
  /// outputs that did not fit and the rest ran eagerly; nullopt otherwise.
  std::optional<torch::autograd::variable_list> hand_out_live(const std::vector<at::Tensor>& live,
                                                              const backward_nodes& backward,
                                                              c10::cuda::CUDAStream stream,
                                                              const replay_options& options);
  /// Under the pool's turn, before a launch of this graph on `stream`:
  /// orders it after the pool's last launch.
  void follow_last_launch(c10::cuda::CUDAStream stream);
  /// Whether the pool's last hand-out was made on another thread and some
  /// of it is still held: taking it back would swap a storage's memory
  /// under a thread that may be reading it (Note [One pool per stream]).
  bool lent_to_another_thread() const;
  /// Before a launch whose gradients are handed out, under the pool's
  /// turn: orders it after `caller` (the calling thread's current stream)
  /// and the pool's last launch, takes back the gradients the pool's last
  /// hand-out lent, and orders it after the stream their holders were
  /// handed them on (Note [One pool per stream]).
  void follow_pool(c10::cuda::CUDAStream stream, c10::cuda::CUDAStream caller);
  /// Launches the graph on `stream` and records its end (replayed_).
  void launch(c10::cuda::CUDAStream stream);
  /// Records on `stream` that the work on this graph's outputs is queued.
  void mark_replayed(c10::cuda::CUDAStream stream);
  /// At capture, its trials done: points it at the training stream's cuBLAS
  /// workspace instead of the capture's own (or, on a driver that cannot
  /// move its pointers, keeps the capture's own), and keeps it to that
  /// stream (Note [One cuBLAS workspace per training stream]).
  void read_training_workspace(capture_workspaces& workspace, c10::cuda::CUDAStream training);
  /// At capture: a replay on `trials` (the training stream) in the pool's
  /// turn; returns copies of its outputs if `read_outputs`.
  std::vector<at::Tensor> trial_replay(c10::cuda::CUDAStream trials, bool read_outputs);
  /// At capture: no replay writes into a bound input (checked by one on
  /// `twins`, copies of the static buffers).
  bool reads_stale_harmlessly(const std::vector<at::Tensor>& twins, c10::cuda::CUDAStream trials);
  /// At capture: finds in `recording` the one node that reads each input
  /// an early launch reads live; false where one has none or several, or
  /// where more than max_live_holders nodes hold them.
  bool find_live_holders(const functional::recording& recording);
  /// At a replay of `live`, lifted from `backward`: finds each such input
  /// among its holder's tensors, or the root's (find_holder); false where
  /// one is in neither.
  bool learn_live_holders(const std::vector<at::Tensor>& live, const backward_nodes& backward);
  /// Puts into `head`, a walk's first nodes, the node holding each input
  /// an early launch reads live, where it lacks one, by the holder's path;
  /// false where a path leads nowhere or to a node of another type.
  bool reach_holders(std::vector<torch::autograd::Node*>& head) const;
  /// Before an early launch: points the graph at the integer inputs of
  /// `backward` where their holders have them, and returns the copies of
  /// the copied ones from their holders; nullopt where a holder's shape is
  /// not the graph's.
  std::optional<std::vector<copy_span>> read_live_holders(const backward_nodes& backward);
  /// After a replay of `live`, lifted from `backward`: whether the next may
  /// launch before its lift.
  void note_addresses(const std::vector<at::Tensor>& live, bool moved,
                      const backward_nodes& backward);
  using graph_handle = std::unique_ptr<CUgraph_st, cudaError_t (*)(cudaGraph_t)>;
  /// The recording captured again on other inputs, not instantiated.
  using twin_capture = std::function<graph_handle(const std::vector<at::Tensor>& inputs)>;
  /// Finds the inputs the graph reads where they live, all but `copied`,
  /// and leaves it pointing at `recorded` (the lifted tensors of the
  /// backward it was recorded from).
  void bind_inputs(c10::cuda::CUDAStream trials, log_level level, const twin_capture& capture_twin,
                   const std::vector<at::Tensor>& recorded, const std::vector<uint32_t>& copied);
  /// One trial of Note [Bound inputs]: whether a replay with the `trial`
  /// inputs read from `twins` and their static buffers poisoned gives
  /// `expected`. Leaves the graph with the arguments it was captured with.
  bool binding_holds(bound_inputs& found, const std::vector<bool>& trial,
                     const std::vector<at::Tensor>& twins, const expected_outputs& expected,
                     c10::cuda::CUDAStream trials, log_level level);
  std::vector<at::Tensor> outputs_now() const;

  c10::DeviceIndex device_ = 0;
  std::shared_ptr<graph_pool> pool_;  ///< where its kernels write, shared with its stream's graphs
  cudaGraph_t graph_ = nullptr;  ///< what exec_ was instantiated from: its nodes name what bound_ rewrites
  cudaGraphExec_t exec_ = nullptr;
  /// The static buffers; a bound input's is a meta tensor of its layout.
  std::vector<at::Tensor> inputs_;
  std::vector<bool> borrowed_;
  /// Python scalars (wrapped numbers): the kernels took their values at the
  /// capture, which the shape key holds (Note [Python scalars in graphs]).
  std::vector<bool> baked_;
  /// Where each borrowed parameter's data was at capture, as the graph's
  /// kernels read it: `set_data` can move a parameter while its tensor
  /// (inputs_) stays the same.
  std::vector<const void*> captured_at_;
  std::vector<leaf_gradient> leaves_;  ///< by piece, each piece's in the order the stock engine reaches them
  size_t live_nodes_ = 0;  ///< the live ones of leaves_, and the cuts
  std::vector<cut> cuts_;  ///< in the order the recording calls them
  std::string cut_names_;
  /// Where there are cuts: what the rest of a backward runs eagerly from.
  std::shared_ptr<const functional::recording> recording_;
  /// Where there are live ones: per leaf position, the event the graph
  /// records once that leaf's gradient is written (an external event
  /// node), and the stream the leaves are handed out on.
  std::vector<cudaEvent_t> ready_;
  std::optional<c10::cuda::CUDAStream> leaf_stream_;
  bound_inputs bound_;
  std::shared_ptr<lent_gradients> lent_ = std::make_shared<lent_gradients>();
  std::vector<at::Tensor> results_;
  /// Recorded after its last launch, and again after a hand-out that read
  /// its outputs on the GPU; on replayed_on_.
  std::optional<at::cuda::CUDAEvent> replayed_;
  std::optional<c10::cuda::CUDAStream> replayed_on_;
  std::optional<cudaStream_t> workspace_stream_;  ///< see launches_on
  std::vector<at::DataPtr> capture_workspaces_;   ///< where its pointers could not move
  size_t capture_workspace_bytes_ = 0;
  bool counted_ = false;  ///< its bytes are in graph_counters
  /// Written once, under the pool's turn, before rebind_refused_ is set; never after.
  std::string rebind_refusal_;
  std::vector<uint32_t> rebind_refused_inputs_;
  std::atomic<bool> rebind_refused_{false};
  std::atomic<uint64_t> last_used_{0};
  std::string sharing_;  ///< see sharing()
  /// An input an early launch reads live, from the one node that holds it
  /// lifted alone (Note [Early launch]): a bound integer input, which the
  /// graph is pointed at (an index read stale sends a kernel out of
  /// bounds), or a copied input, which is copied in from there.
  struct live_holder {
    uint32_t input = 0;  ///< its lifted position
    uint32_t node = 0;   ///< the one node that reads it (walk order), or the root (learnt)
    bool copied = false;
    /// Its place among that node's tensors lifted alone, and the shape key
    /// of that lift; learnt at a replay, which fits the graph.
    std::optional<uint32_t> ordinal;
    uint64_t key = 0;
    /// Learnt with them: the edges that lead to that node from the walk's
    /// second node (the root edge's), each by its index, and the node's
    /// type; how a bet before the walk finds it (Note [Bets before the
    /// walk]). Nullopt where no edges lead there.
    std::optional<std::vector<uint32_t>> path;
    const std::type_info* type = nullptr;
  };
  std::vector<live_holder> holders_;  ///< by node, each node's in input order
  /// Per input, where the last early launch copied it in from; null for
  /// inputs it did not copy.
  std::vector<const void*> copied_early_from_;
  /// Whether a launch on the last replay's addresses, reused by now, can
  /// neither fault nor corrupt, and every input it reads live has a holder
  /// (Note [Early launch]).
  bool stale_reads_harmless_ = true;
  /// The device's segment frees when the last replay's addresses were
  /// proven launchable early; nullopt where they were not.
  std::optional<int64_t> launchable_at_frees_;
  size_t bytes_ = 0;
  size_t pool_bytes_ = 0;
  size_t bound_bytes_ = 0;
};

} // namespace gradd::cuda
