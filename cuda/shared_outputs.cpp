// Leaf gradients shared by a structure's graphs (see shared_outputs.hpp).
//
// Note [Outputs shared across shapes]
// A structure swept over batch sizes has a graph per shape in its stream's pool
// (Note [One pool per stream]). Each capture reuses the intermediates of the
// graphs before it, but not their outputs, which they still hold: so the pool
// held one set of parameter gradients per shape, though every shape's are the
// same size (a sweep of four batch sizes: four sets, where the stock engine
// holds one). A graph whose structure already has a graph in the pool writes
// each leaf gradient into that graph's buffer instead: the capture copies the
// gradient into a scratch buffer of the same layout (one launch of gradd's
// batched copy), and the gradient's own memory goes back to the pool for the
// rest of the graph and the captures after it. The graph's trials (Note
// [Bound inputs]) replay it while the training thread may hold the other
// graphs' gradients, so until they are done it writes the scratch buffers. Then
// the copies' kernel nodes are pointed at the older graph's buffers and the
// scratch goes. (Kernel nodes, not memcpy nodes: a memcpy node's instance takes
// new memory only where it is mapped as its old memory was, and the scratch
// lies outside the pool.) From then on either graph's launch overwrites the
// other's gradients, as a launch in the pool already may overwrite any graph's
// outputs: the pool's last hand-out is taken back before every launch (Note
// [Lent gradients]). Only gradients that nothing else in the graph holds are
// shared (a view, such as a gradient summed to its leaf's broadcast shape or
// a weight's transpose, holds its base: that one counts as its own), with
// the older buffer's dtype, sizes and strides, dense from their storage's
// first byte; a graph cut into pieces shares none. The buffers live
// as long as any graph that writes them.

#include "cuda/shared_outputs.hpp"

#include "cuda/batched_copy.hpp"

#include <ATen/ops/empty_strided.h>
#include <c10/cuda/CUDAException.h>

#include <algorithm>

namespace gradd::cuda {

namespace {

/// Whether a copy of `t`'s bytes from its data pointer is a copy of `t`.
bool dense_from_start(const at::Tensor& t) {
  return t.defined() && t.storage_offset() == 0 && t.is_non_overlapping_and_dense();
}

/// Whether nothing but `t` holds its memory: no other tensor, and where `t`
/// is a view (a gradient summed to its leaf's shape, a transpose), no other
/// view of the base it holds.
bool held_alone(const at::Tensor& t) {
  if (t.use_count() != 1)
    return false;
  if (!t.is_view())
    return t.storage().use_count() == 1;
  return t._base().use_count() == 1 && t.storage().use_count() == 2;
}

} // namespace

shared_outputs::shared_outputs(std::vector<at::Tensor> kin)
    : kin_(std::move(kin)),
      scratch_(kin_.size()),
      diverted_(kin_.size(), false),
      redirected_(kin_.size(), false) {
  for (size_t k = 0; k < kin_.size(); ++k)
    if (dense_from_start(kin_[k]))
      scratch_[k] = at::empty_strided(kin_[k].sizes(), kin_[k].strides(), kin_[k].options());
}

void shared_outputs::divert(size_t leaf, at::Tensor& gradient, cudaStream_t stream) {
  if (leaf >= scratch_.size() || !gradient.defined())
    return;
  if (!scratch_[leaf].defined())
    return keeps_own("no buffer of the older graph that a copy fills whole");
  const auto& into = scratch_[leaf];
  // Held by nothing but the capture's outputs: no other value, output or
  // input of the graph is this tensor or a view of its memory.
  if (!held_alone(gradient))
    return keeps_own("the graph holds the gradient elsewhere too");
  if (!dense_from_start(gradient) || gradient.device() != into.device()
      || gradient.scalar_type() != into.scalar_type() || gradient.sizes() != into.sizes()
      || gradient.strides() != into.strides())
    return keeps_own("the gradient is laid out otherwise");
  if (gradient.nbytes() == 0)
    return keeps_own("the gradient is empty");
  copy_span span{gradient.const_data_ptr(), into.data_ptr(), gradient.nbytes()};
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  cudaGraph_t graph = nullptr;
  C10_CUDA_CHECK(cudaStreamGetCaptureInfo(stream, &status, nullptr, &graph));
  auto node = captured_copy(span, stream);
  // Where the copy's node is not known, the scratch buffer stays the leaf's.
  if (node)
    copies_.push_back({graph, node, leaf, span.source});
  gradient = into;
  diverted_[leaf] = true;
}

void shared_outputs::redirect(cudaGraph_t graph, cudaGraphExec_t exec) {
  for (const auto& copy : copies_) {
    if (copy.graph != graph || redirected_[copy.leaf])
      continue;
    const auto& kin = kin_[copy.leaf];
    auto error = redirect_copy(exec, copy.node, {copy.source, kin.data_ptr(), kin.nbytes()});
    if (error != cudaSuccess) {
      (void)cudaGetLastError();  // refused: this leaf keeps its scratch buffer
      keeps_own(std::string("the CUDA driver would not point its copy elsewhere: ")
                + cudaGetErrorString(error));
      continue;
    }
    scratch_[copy.leaf] = kin;
    redirected_[copy.leaf] = true;
  }
  for (size_t k = 0; k < scratch_.size(); ++k)
    if (diverted_[k] && !redirected_[k])
      keeps_own("its copy is not in the graph");
  copies_.clear();
  kin_.clear();
}

std::string shared_outputs::summary() const {
  if (diverted_.empty())
    return "";
  auto shared = std::count(redirected_.begin(), redirected_.end(), true);
  return std::to_string(shared) + " of " + std::to_string(diverted_.size())
         + " leaf gradients written into an older graph's buffers"
         + (why_not_.empty() ? "" : " (not all: " + why_not_ + ")");
}

size_t shared_outputs::scratch_bytes() const {
  size_t bytes = 0;
  for (size_t k = 0; k < scratch_.size(); ++k)
    if (diverted_[k] && !redirected_[k])
      bytes += scratch_[k].nbytes();
  return bytes;
}

void shared_outputs::keeps_own(const std::string& why) {
  if (why_not_.empty())
    why_not_ = why;
}

const at::Tensor& shared_outputs::buffer(size_t leaf) const {
  static const at::Tensor none;
  return leaf < scratch_.size() && diverted_[leaf] ? scratch_[leaf] : none;
}

} // namespace gradd::cuda
