#pragma once

// Note [A seed made once]
// `loss.backward()` in C++ starts from a gradient of ones that libtorch
// makes before any engine sees the backward (torch::autograd::backward,
// `ones_like`): an allocation and a fill kernel's launch on the CPU, the
// fill on the GPU ahead of the backward's own work. Where a CUDA graph
// serves the backward, that is time the floor does not pay; on a Hopper GPU a
// seed made once took 5–33 µs off the small models' backwards (mlp 108 →
// 75 µs, floor_ratio 1.72 → 1.20).
// So gradd wraps libtorch's variable hooks, through which
// Tensor::backward() reaches torch::autograd::backward, and hands a
// backward of a 0-dim floating CUDA loss with a grad_fn the seed its
// thread made once for that device and dtype (cuda::shared_seed) as its
// explicit gradient. libtorch's checks of an explicit gradient pass it
// where they would have made ones themselves.
//
// Only a graph reads the shared seed: nothing it writes or hands out
// aliases it. Any other path could expose it (a hook given the loss's
// gradient may keep or change it; a view of it may become a leaf's
// .grad), so a backward that no graph serves gets a seed of its own, made
// as libtorch makes one, before anything else reads its seed: in gradd's
// hook while its plan or the stock engine runs (own_seeds_scope), at the
// entry gate where gradd is off. A graph must see the shared seed wherever
// it serves, before the engine or in the hook: a root gradient at another
// address each time would move a graph's input every step, and no bet
// would hold (tried first: 6 of the [cuda] cases lost their early
// launches). Only where the entry gate is installed (C++ processes):
// Python's backward() makes its seed in Python.

#include <torch/csrc/autograd/variable.h>

namespace torch::autograd {
struct GraphRoot;
}

namespace gradd::engine {

/// Wraps libtorch's variable hooks with the seeding ones above. Called once,
/// by install_entry_gate, where it makes gradd's engine the default.
void install_shared_seed();

/// Whether `inputs` (the gradients a backward starts from) hold the seed
/// this thread's backward() handed out.
bool holds_shared_seed(const torch::autograd::variable_list& inputs) noexcept;

/// `inputs` with the shared seed replaced by a seed of the backward's own,
/// made as libtorch makes it.
torch::autograd::variable_list own_seeds(const torch::autograd::variable_list& inputs);

/// While it lives, `root` (the GraphRoot Engine::execute made) holds a
/// seed of the backward's own where it held the shared one; the shared one
/// again after it, for a recording that lifted that (a capture reads the
/// root as its lift found it).
class own_seeds_scope {
public:
  explicit own_seeds_scope(torch::autograd::Node& root);
  ~own_seeds_scope();
  own_seeds_scope(const own_seeds_scope&) = delete;
  own_seeds_scope& operator=(const own_seeds_scope&) = delete;

private:
  torch::autograd::GraphRoot* root_ = nullptr;
  torch::autograd::variable_list shared_;
};

} // namespace gradd::engine
