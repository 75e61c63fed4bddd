// Which inputs a CUDA graph reads where they live: the binding a capture
// ends with, and the replays that check it (backward_graph.hpp).
//
// Note [Bound inputs]
// Copying the saved activations into the static buffers costs device time
// in proportion to their bytes: ResNet-18 at batch 32 saves about a GiB,
// whose copy was most of what separated its replay from the floor. Instead
// a replay points the graph's kernels at the live tensors (bound_inputs),
// rewriting a kernel node's arguments (~0.9 µs each on a Hopper machine's host)
// only where its input moved since the last replay; a training loop's
// caching allocator mostly hands a step the addresses of the step before,
// so most replays rewrite nothing (`graph_rewrites`). Which arguments are
// pointers derived from an input shows by capturing the recording a second
// time, its twin, with every candidate's static buffer copied elsewhere,
// and comparing the two graphs (bound_inputs.cpp); the twin is not
// instantiated and its pool goes with it. A graph may also reach an input
// in ways no argument shows (a pointer table in device memory, an output
// that is a view of it), so a binding is kept only after a replay with the
// bound inputs' static buffers poisoned, the graph pointed at the twin's
// copies, gave the outputs of a plain replay. The poison is
// NaN bits for floating types and zeros for the others: all-ones bits are
// an index of -1, which would send a reader the arguments do not show out
// of bounds. An integer input that holds only zeros is not bound, since
// the poison would not show who reads it. Where the trial fails, each
// input is tried alone. A trial's outputs must be the plain replay's bit
// for bit, but a graph whose kernels are not deterministic (cuDNN's
// convolution backward sums with atomics for some shapes) differs from
// itself replay to replay: there, each output that differed may differ by
// up to four times the most its plain replays did, with NaN exactly where
// the plain replay has it. A stale read is far from rounding: poisoned
// floats bring NaN, a comparison with NaN turns a mask off, a zeroed index
// sends a gradient to the wrong row (expected_outputs.hpp). Before that
// rule such graphs copied every input and never launched early: some of
// the convnet sweep's and resnet18's. The live tensors are not used for
// this: the training thread may be writing to them (an accumulating
// `.grad`). A bound graph
// that writes into an input writes into the live tensor, as the stock
// engine's own call of that op would; one more replay on the twin's copies
// finds such a graph, which is then never launched early (Note [Early
// launch]). Then the bound inputs' static buffers are freed; the inputs
// nothing can bind are copied in by one batched launch. The graph is left
// pointing where the backward it was recorded from had its inputs: the
// loop's next backward of that shape mostly has them there, so its first
// replay asks the driver for nothing, which it may refuse while a library
// holds a kernel's shared memory limit below the node's need (docs/design.md,
// Known gaps).

#include "cuda/backward_graph.hpp"

#include "config/log.hpp"
#include "cuda/expected_outputs.hpp"
#include "cuda/static_buffer.hpp"
#include "cuda/tensor_compare.hpp"

#include <ATen/ops/empty_strided.h>
#include <c10/cuda/CUDAException.h>

#include <algorithm>
#include <functional>
#include <optional>
#include <string>

namespace gradd::cuda {

namespace {

/// The byte a trial fills an input's static buffer with (Note [Bound inputs]).
int poison_byte(const at::Tensor& t) {
  auto type = t.scalar_type();
  return at::isFloatingType(type) || at::isComplexType(type) ? 0xFF : 0;
}

/// Which of the `candidates` among `inputs` poisoning changes, so that a
/// trial sees who reads them: floating ones, and others that hold a
/// non-zero byte (looked for in one comparison).
std::vector<bool> poison_shows(const std::vector<at::Tensor>& inputs,
                               const std::vector<bool>& candidates) {
  std::vector<bool> shows(inputs.size(), false);
  std::vector<tensor_pair> zero_poisoned;
  std::vector<size_t> of_pair;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!candidates[i])
      continue;
    if (poison_byte(inputs[i]) != 0) {
      shows[i] = true;
    } else {
      zero_poisoned.emplace_back(inputs[i], at::Tensor());
      of_pair.push_back(i);
    }
  }
  auto non_zero = bytes_differ(zero_poisoned);
  for (size_t p = 0; p < of_pair.size(); ++p)
    shows[of_pair[p]] = non_zero[p];
  return shows;
}

} // namespace

std::vector<at::Tensor> backward_graph::trial_replay(c10::cuda::CUDAStream trials,
                                                     bool read_outputs) {
  // The training thread may be replaying the pool's other graphs: this
  // one's launch and the copies of its outputs take their turn (Note [One
  // pool per stream]). Nothing it overwrites is lent: the others' outputs
  // were held when it was captured.
  auto turn = pool_->take();
  follow_last_launch(trials);
  C10_CUDA_CHECK(cudaGraphLaunch(exec_, trials.stream()));
  auto outputs = read_outputs ? outputs_now() : std::vector<at::Tensor>{};
  mark_replayed(trials);
  return outputs;
}

std::vector<at::Tensor> backward_graph::outputs_now() const {
  std::vector<at::Tensor> now;
  for (const auto& leaf : leaves_)
    now.push_back(leaf.buffer.defined() ? leaf.buffer.clone() : leaf.buffer);
  for (const auto& result : results_)
    now.push_back(result.defined() ? result.clone() : result);
  return now;
}

bool backward_graph::binding_holds(bound_inputs& found, const std::vector<bool>& trial,
                                   const std::vector<at::Tensor>& twins,
                                   const expected_outputs& expected, c10::cuda::CUDAStream trials,
                                   log_level level) {
  auto stream = trials.stream();
  std::vector<const void*> sources(inputs_.size());
  for (size_t i = 0; i < inputs_.size(); ++i) {
    if (!found.bindable(i))
      continue;
    sources[i] = inputs_[i].const_data_ptr();
    if (!trial[i])
      continue;
    sources[i] = twins[i].const_data_ptr();
    C10_CUDA_CHECK(cudaMemsetAsync(inputs_[i].mutable_data_ptr(), poison_byte(inputs_[i]),
                                   span_bytes(inputs_[i]), stream));
  }
  bool holds = found.bind(exec_, sources)
               && expected.matched_by(trial_replay(trials, /*read_outputs=*/true));
  for (size_t i = 0; i < inputs_.size(); ++i) {
    if (!trial[i])
      continue;
    C10_CUDA_CHECK(cudaMemcpyAsync(inputs_[i].mutable_data_ptr(), twins[i].const_data_ptr(),
                                   span_bytes(inputs_[i]), cudaMemcpyDeviceToDevice, stream));
    sources[i] = inputs_[i].const_data_ptr();
  }
  at::cuda::CUDAEvent done;  // not the stream: the training thread queues there too
  done.record(trials);
  done.synchronize();
  if (!found.bind(exec_, sources)) {  // the arguments it was captured with
    // Seen on a Hopper GPU for a node of resnet18 that took the trial's: a
    // fresh instantiation has them all, and the next bind rewrites all.
    log(level, log_level::debug, "the CUDA driver refused a graph node's own arguments back ("
                                      + found.refusal() + "): instantiated again");
    C10_CUDA_CHECK(cudaGraphExecDestroy(exec_));
    exec_ = nullptr;
    C10_CUDA_CHECK(cudaGraphInstantiate(&exec_, graph_, 0));
  }
  return holds;
}

bool backward_graph::reads_stale_harmlessly(const std::vector<at::Tensor>& twins,
                                            c10::cuda::CUDAStream trials) {
  std::vector<at::Tensor> originals, copies;
  std::vector<const void*> sources(inputs_.size());
  for (size_t i = 0; i < inputs_.size(); ++i)
    if (bound_.bindable(i)) {
      originals.push_back(inputs_[i]);
      copies.push_back(twins[i]);
      sources[i] = twins[i].const_data_ptr();
    }
  if (!bound_.bind(exec_, sources))
    return false;  // the next replay's bind rewrites every node
  trial_replay(trials, /*read_outputs=*/false);
  return bitwise_equal(copies, originals);
}

void backward_graph::bind_inputs(c10::cuda::CUDAStream trials, log_level level,
                                 const twin_capture& capture_twin,
                                 const std::vector<at::Tensor>& recorded,
                                 const std::vector<uint32_t>& copied) {
  // Each candidate's twin buffer lies an odd multiple of 256 bytes into
  // its allocation (bound_inputs.cpp says why); it holds the same bytes,
  // and the trials point the graph at it.
  std::vector<at::Tensor> twins = inputs_;
  std::vector<twin_buffers> buffers(inputs_.size());
  size_t candidates = 0;
  for (size_t i = 0; i < inputs_.size(); ++i) {
    const auto& buffer = inputs_[i];
    if (borrowed_[i] || !buffer.defined() || buffer.device().index() != device_
        || span_bytes(buffer) == 0 || std::binary_search(copied.begin(), copied.end(), i))
      continue;
    twins[i] = static_copy(buffer, 256 * (2 * candidates++ + 1));
    buffers[i] = {buffer.const_data_ptr(), twins[i].const_data_ptr(), span_bytes(buffer)};
  }
  if (candidates == 0)
    return;
  auto twin = capture_twin(twins);
  auto found = bound_inputs::find(graph_, twin.get(), buffers);
  found.keep_settable(exec_);
  std::vector<bool> bindable(inputs_.size());
  for (size_t i = 0; i < inputs_.size(); ++i)
    bindable[i] = found.bindable(i);
  auto keep = poison_shows(inputs_, bindable);
  found.keep_only(keep);
  // Copying all leaves bound_ empty: the graph has its captured arguments
  // (binding_holds gives them back after each trial).
  auto copy_all = [&](const std::string& why) {
    log(level, log_level::debug, "a CUDA graph copies all its inputs: " + why);
  };
  if (found.empty()) {
    if (!found.why_not().empty())
      copy_all(found.why_not());
    return;
  }

  auto expected = expected_outputs::of([&] { return trial_replay(trials, /*read_outputs=*/true); });
  if (!expected)
    return copy_all("its replays differ from one another other than by rounding");
  if (!binding_holds(found, keep, twins, *expected, trials, level)) {
    // One input read some other way spoils the whole trial: try each alone.
    for (size_t i = 0; i < inputs_.size(); ++i)
      if (keep[i]) {
        std::vector<bool> alone(inputs_.size(), false);
        alone[i] = true;
        keep[i] = binding_holds(found, alone, twins, *expected, trials, level);
      }
    found.keep_only(keep);
    if (!found.refusal().empty())
      log(level, log_level::debug, "the CUDA driver refused new arguments for " + found.refusal());
    if (found.empty() || !binding_holds(found, keep, twins, *expected, trials, level))
      return copy_all("it reads them other than through its arguments");
  }
  bound_ = std::move(found);
  stale_reads_harmless_ = reads_stale_harmlessly(twins, trials);
  std::vector<const void*> recorded_at(inputs_.size());
  for (size_t i = 0; i < inputs_.size(); ++i)
    if (keep[i])
      recorded_at[i] = recorded[i].const_data_ptr();
  (void)bound_.bind(exec_, recorded_at);  // refused: the first replay rewrites every node
  for (size_t i = 0; i < inputs_.size(); ++i)
    if (keep[i]) {
      bound_bytes_ += buffers[i].bytes;
      inputs_[i] = at::empty_strided(inputs_[i].sizes(), inputs_[i].strides(),
                                     inputs_[i].options().device(c10::kMeta));
    }
  log(level, log_level::debug,
      "a CUDA graph reads " + std::to_string(std::count(keep.begin(), keep.end(), true))
          + " inputs where they live (" + std::to_string(bound_bytes_ >> 20) + " MiB not copied)");
}

} // namespace gradd::cuda
