// CUDA streams: nodes whose forward ran on a side stream run their backward
// there, gradients crossing streams are waited for, and the caller's stream
// is synchronized with the leaves' at the end, as on the stock engine.

#include "engine/grad_check.hpp"

#include <c10/core/Event.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>

TEST_CASE("a backward across CUDA streams matches the stock engine", "[engine][cuda]") {
  if (!torch::cuda::is_available()) {
    WARN("CUDA not available: CUDA stream case skipped");
    return;
  }
  c10::Device device(c10::kCUDA, 0);
  c10::impl::VirtualGuardImpl cuda(c10::DeviceType::CUDA);
  auto side = cuda.getStreamFromGlobalPool(device);
  auto main_stream = cuda.getStream(device);
  torch::manual_seed(21);
  std::vector<torch::Tensor> w{
      torch::randn({256, 256}, torch::dtype(torch::kFloat32).device(device)).requires_grad_(),
      torch::randn({256, 256}, torch::dtype(torch::kFloat32).device(device)).requires_grad_()};
  auto x = torch::randn({64, 256}, torch::dtype(torch::kFloat32).device(device));
  auto step = [&] {
    torch::Tensor a;
    {
      c10::StreamGuard on_side(side);
      a = torch::tanh(x.mm(w[0]));  // forward (and so backward) on the side stream
    }
    c10::Event forward_done(c10::DeviceType::CUDA);
    forward_done.record(side);
    forward_done.block(main_stream);
    auto loss = (a.mm(w[1]) + a).pow(2).sum();
    loss.backward();
    cuda.synchronizeStream(main_stream);  // what the caller may rely on
    return std::vector<torch::Tensor>{};
  };
  auto s = gradd::test::check_against_stock(w, step, 3);
  CHECK(s.plan_backwards == 3);
}
