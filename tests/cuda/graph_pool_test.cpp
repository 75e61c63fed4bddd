// One memory pool for the CUDA graphs of a stream (Note [One pool per
// stream], cuda/graph_pool.cpp): what it holds, and the rules that keep
// gradients exact when graphs share it.

#include "cuda/graph_loop.hpp"

#include <c10/core/AllocatorConfig.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <c10/cuda/CUDACachingAllocator.h>

#include <cstdlib>
#include <string>
#include <thread>

using gradd::test::have_cuda;
using gradd::test::mlp;
using gradd::test::policy;
using gradd::test::require_bitwise_equal;
using torch::Tensor;

namespace {

/// loss = (x * w).square().mean() for `rows` rows x as wide as w: the
/// backward's working set grows with `rows`, its gradient (w's) does not.
struct rows_times_weight {
  explicit rows_times_weight(int64_t width)
      : w(torch::randn({width}, torch::device(torch::kCUDA)).requires_grad_()) {}
  Tensor loss(int64_t rows, int64_t seed) const {
    auto width = w.size(0);
    auto x = torch::sin(torch::arange(rows * width, torch::device(torch::kCUDA))
                            .reshape({rows, width}) * (0.001 * seed));
    return (x * w).square().mean();
  }
  Tensor w;
};

} // namespace

TEST_CASE("the graphs of one stream share a memory pool (Note [One pool per stream])",
          "[cuda][graphs]") {
  if (!have_cuda())
    return;
  auto graphs = policy(gradd::graph_shape_policy::static_shapes);

  SECTION("a sweep's graphs hold about one working set, not one each") {
    // Activations of 2 to 8 MiB: each graph's working set is a 20 MiB
    // segment or more of the caching allocator; one pool each held four.
    mlp m;
    auto params = m.parameters();
    gradd::reset();
    gradd::enable_guard on{graphs};
    uint64_t first = 0;
    for (int64_t batch : {32768, 24576, 16384, 8192}) {
      gradd::test::clear_grads(params);
      m.loss(batch, 0).backward();
      REQUIRE(gradd::wait_for_compiles());
      if (first == 0)
        first = gradd::stats().graph_bytes;
    }
    auto s = gradd::stats();
    REQUIRE(s.graphs == 4);
    INFO("graph_bytes: " << first << " for the first graph, " << s.graph_bytes << " for four");
    // One pool each held about 2.5 times the first (each graph its own
    // working set); shared, the later graphs fit in the first's pool but
    // for their outputs (1.29 times in an expandable pool on an H100).
    CHECK(s.graph_bytes < first + first / 2);

    // Note [Expandable pool segments]: the pool is one growing range, and
    // the process's setting is off again once the captures are done.
    auto chose = [](const char* name) {
      const char* settings = std::getenv(name);
      return settings && std::string(settings).find("expandable_segments") != std::string::npos;
    };
    if (!chose("PYTORCH_CUDA_ALLOC_CONF") && !chose("PYTORCH_ALLOC_CONF")) {
      size_t pool_segments = 0;
      for (const auto& segment : c10::cuda::CUDACachingAllocator::snapshot({0, 0}, false).segments)
        if (segment.owner_private_pool_id != c10::MempoolId_t{0, 0}) {
          ++pool_segments;
          CHECK(segment.is_expandable);
        }
      CHECK(pool_segments > 0);
      CHECK_FALSE(c10::CachingAllocator::AcceleratorAllocatorConfig::use_expandable_segments());
    } else {
      WARN("PYTORCH_CUDA_ALLOC_CONF names expandable_segments: the pool's segments are not checked");
    }
  }
  SECTION("a gradient held while another graph of the pool replays keeps its values") {
    // The narrow step's graph is captured second, so its gradient may lie
    // where the wide step's graph writes its intermediates. No bets: a lost
    // one would launch the narrow graph, which takes back its own.
    graphs.cuda_graphs.early_launch = false;
    rows_times_weight m(1 << 20);
    auto step = [&](int64_t rows, int64_t seed) {
      m.w.mutable_grad() = Tensor();
      m.loss(rows, seed).backward();
      REQUIRE(gradd::wait_for_compiles());
      return m.w.grad();
    };
    gradd::reset();
    gradd::enable_guard on{graphs};
    step(4, 1);  // recorded: the wide graph
    step(2, 2);  // recorded: the narrow graph
    auto held = step(2, 3);  // the narrow graph's gradient, kept
    auto before = gradd::test::exact_copy(held);
    auto copies_before = gradd::stats().graph_copy_on_writes;
    step(4, 4);  // the wide graph replays
    CHECK(gradd::stats().graph_backwards == 2);
    CHECK(gradd::stats().graph_copy_on_writes == copies_before + 1);  // the wide one took it back
    require_bitwise_equal(before, gradd::test::exact_copy(held));
  }
}

TEST_CASE("graphs of one pool replayed on two streams run one at a time", "[cuda][graphs]") {
  if (!have_cuda())
    return;
  // Two shapes captured from backwards on one stream share its pool (Note
  // [One pool per stream]); then the wide one replays on that stream and
  // the narrow one on another, in turn, with nothing waiting in between but
  // what gradd orders. Run side by side, each would write the other's
  // intermediates. (Two launches of one graph the driver orders itself.)
  c10::Device device(c10::kCUDA, 0);
  c10::impl::VirtualGuardImpl cuda(c10::DeviceType::CUDA);
  std::vector<c10::Stream> streams{cuda.getStreamFromGlobalPool(device),
                                   cuda.getStreamFromGlobalPool(device)};
  rows_times_weight m(1 << 22);  // 16 MiB a row: replays long enough to overlap
  auto step = [&](int64_t i, int64_t rows, const c10::Stream& stream) {
    c10::StreamGuard on(stream);
    m.w.mutable_grad() = Tensor();
    m.loss(rows, i + 1).backward();
    return gradd::test::exact_copy(m.w.grad());  // queued on that stream
  };
  constexpr int64_t steps = 10;
  auto in_turn = [&](int64_t i) {
    return i % 2 == 0 ? step(i, 8, streams[0]) : step(i, 4, streams[1]);
  };
  std::vector<Tensor> stock, ours;
  {
    gradd::disable_guard off;
    for (int64_t i = 0; i < steps; ++i)
      stock.push_back(in_turn(i));
    torch::cuda::synchronize();
  }
  auto graphs = policy(gradd::graph_shape_policy::static_shapes);
  gradd::reset();
  gradd::enable_guard on{graphs};
  for (int64_t rows : {8, 4}) {  // recorded on the first stream
    step(0, rows, streams[0]);
    REQUIRE(gradd::wait_for_compiles());
  }
  torch::cuda::synchronize();
  for (int64_t i = 0; i < steps; ++i)
    ours.push_back(in_turn(i));
  REQUIRE(gradd::wait_for_compiles());  // no capture under way: a device-wide wait fails then
  torch::cuda::synchronize();
  CHECK(gradd::stats().graph_backwards == steps);
  for (int64_t i = 0; i < steps; ++i) {
    INFO("step " << i);
    require_bitwise_equal(stock[i], ours[i]);
  }
}

TEST_CASE("gradients lent to another thread are not taken back under it", "[cuda][graphs]") {
  if (!have_cuda())
    return;
  // Taking lent gradients back swaps their storage's memory, which the
  // thread that holds them may be reading (Note [One pool per stream]):
  // while another thread's hand-out is held, a hit runs on its plan.
  rows_times_weight m(1 << 16);
  auto step = [&](int64_t seed) {
    m.w.mutable_grad() = Tensor();
    m.loss(64, seed).backward();
    return m.w.grad();
  };
  std::vector<Tensor> stock;
  {
    gradd::disable_guard off;
    for (int64_t seed = 0; seed < 5; ++seed)
      stock.push_back(gradd::test::exact_copy(step(seed)));
  }
  auto graphs = policy(gradd::graph_shape_policy::static_shapes);
  graphs.cuda_graphs.early_launch = false;
  gradd::reset();
  gradd::enable_guard on{graphs};
  step(0);  // recorded
  REQUIRE(gradd::wait_for_compiles());
  require_bitwise_equal(stock[1], gradd::test::exact_copy(step(1)));  // this thread's hand-out
  Tensor held;
  std::thread([&] { held = step(2); }).join();  // another's, held
  REQUIRE(gradd::stats().graph_backwards == 2);
  REQUIRE(gradd::stats().graph_lent_elsewhere == 0);

  require_bitwise_equal(stock[3], gradd::test::exact_copy(step(3)));
  CHECK(gradd::stats().graph_backwards == 2);  // the plan served it
  CHECK(gradd::stats().graph_lent_elsewhere == 1);
  CHECK(gradd::stats().graph_copy_on_writes == 0);
  require_bitwise_equal(stock[2], gradd::test::exact_copy(held));

  held = Tensor();  // let go: the graph serves again
  require_bitwise_equal(stock[4], gradd::test::exact_copy(step(4)));
  CHECK(gradd::stats().graph_backwards == 3);
  CHECK(gradd::stats().graph_lent_elsewhere == 1);
}

TEST_CASE("a gradient held past its graph keeps its values and memory (Note [Lent gradients])",
          "[cuda][graphs]") {
  if (!have_cuda())
    return;
  // A graph can go while a gradient it lent is held: evicted on the stream
  // actor's thread, or dropped by reset(). Taking the gradient back there
  // would swap its memory under the thread that holds it; it stays where it
  // is, kept by its holder, and the pool's next launch takes it back.
  rows_times_weight m(1 << 16);
  auto step = [&](int64_t rows, int64_t seed) {
    m.w.mutable_grad() = Tensor();
    m.loss(rows, seed).backward();
    return m.w.grad();
  };
  std::vector<Tensor> stock;
  {
    gradd::disable_guard off;
    for (auto [rows, seed] : {std::pair{4, 1}, {4, 2}, {2, 3}, {2, 4}})
      stock.push_back(gradd::test::exact_copy(step(rows, seed)));
  }
  auto graphs = policy(gradd::graph_shape_policy::static_shapes);
  graphs.cuda_graphs.early_launch = false;  // a lost bet would launch, taking it back
  graphs.cuda_graphs.max_graphs = 1;
  gradd::reset();
  gradd::enable_guard on{graphs};
  step(4, 1);  // recorded
  REQUIRE(gradd::wait_for_compiles());
  auto held = step(4, 2);  // the graph's hand-out, kept
  REQUIRE(gradd::stats().graph_backwards == 1);
  const void* lent_at = held.const_data_ptr();

  SECTION("evicted, it is taken back by the pool's next launch") {
    step(2, 3);  // recorded; its graph evicts the first
    REQUIRE(gradd::wait_for_compiles());
    REQUIRE(gradd::stats().graph_evictions == 1);
    CHECK(held.const_data_ptr() == lent_at);
    CHECK(gradd::stats().graph_copy_on_writes == 0);
    require_bitwise_equal(stock[1], gradd::test::exact_copy(held));

    require_bitwise_equal(stock[3], gradd::test::exact_copy(step(2, 4)));
    CHECK(gradd::stats().graph_backwards == 2);  // the newer graph stayed
    CHECK(gradd::stats().graph_copy_on_writes == 1);
    CHECK(held.const_data_ptr() != lent_at);
    require_bitwise_equal(stock[1], gradd::test::exact_copy(held));
  }
  SECTION("dropped with every graph, its memory stays its own") {
    gradd::reset();
    CHECK(gradd::stats().graphs == 0);
    c10::getDeviceAllocator(c10::kCUDA)->emptyCache();  // the dropped pool's free segments
    auto filler = torch::full({64 << 20}, std::nan(""), torch::device(torch::kCUDA));
    torch::cuda::synchronize();
    CHECK(held.const_data_ptr() == lent_at);
    require_bitwise_equal(stock[1], gradd::test::exact_copy(held));
  }
}

TEST_CASE("a structure's graphs write their gradients into one set of buffers (Note [Outputs "
          "shared across shapes])",
          "[cuda][graphs]") {
  if (!have_cuda())
    return;
  rows_times_weight m(1 << 20);  // a 4 MiB gradient at every shape
  auto step = [&](int64_t rows, int64_t seed) {
    m.w.mutable_grad() = Tensor();
    m.loss(rows, seed).backward();
    return m.w.grad();
  };
  const std::vector<std::pair<int64_t, int64_t>> steps{{4, 1}, {2, 2}, {4, 3}, {2, 4}, {4, 5}};
  std::vector<Tensor> stock;
  {
    gradd::disable_guard off;
    for (auto [rows, seed] : steps)
      stock.push_back(gradd::test::exact_copy(step(rows, seed)));
  }
  auto graphs = policy(gradd::graph_shape_policy::static_shapes);
  graphs.cuda_graphs.early_launch = false;  // a lost bet would launch, taking back what is held
  graphs.logging.level = gradd::log_level::info;  // each capture says what it shares
  gradd::reset();
  gradd::enable_guard on{graphs};
  step(4, 1);  // recorded: the first graph
  REQUIRE(gradd::wait_for_compiles());

  SECTION("the second shape's graph hands out the first one's buffer") {
    step(2, 2);  // recorded: the second graph
    REQUIRE(gradd::wait_for_compiles());
    REQUIRE(gradd::stats().graphs == 2);
    std::vector<const void*> lent_at;
    for (size_t i = 2; i < steps.size(); ++i) {
      auto [rows, seed] = steps[i];
      auto grad = step(rows, seed);
      lent_at.push_back(grad.const_data_ptr());  // `.grad` is the graph's buffer, lent
      INFO("step " << i);
      require_bitwise_equal(stock[i], gradd::test::exact_copy(grad));
    }
    CHECK(gradd::stats().graph_backwards == 3);
    CHECK(lent_at[0] == lent_at[1]);
    CHECK(lent_at[1] == lent_at[2]);
  }
  SECTION("a gradient held while the next shape is captured keeps its values") {
    // The second graph's trials replay it on the stream actor's thread
    // while the first graph's gradient is held here: they must not write it.
    auto held = step(4, 3);
    REQUIRE(gradd::stats().graph_backwards == 1);
    step(2, 2);  // recorded: the second graph, captured and tried meanwhile
    REQUIRE(gradd::wait_for_compiles());
    require_bitwise_equal(stock[2], gradd::test::exact_copy(held));
    auto copies_before = gradd::stats().graph_copy_on_writes;
    require_bitwise_equal(stock[3], gradd::test::exact_copy(step(2, 4)));
    CHECK(gradd::stats().graph_backwards == 2);
    CHECK(gradd::stats().graph_copy_on_writes == copies_before + 1);  // it took the held one back
    require_bitwise_equal(stock[2], gradd::test::exact_copy(held));
  }
}
