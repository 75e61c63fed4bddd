// A host program that brings its own CAF actor system (the in-process actor
// API, docs/design.md, "A host's actor system"). gradd's stages run in it;
// so does a compile service the host spawned, which gradd compiles with
// instead of a daemon over the network, and which the host talks to
// through the same typed interface the daemon serves: it hears an event for
// every compile and asks for statistics.
//
//   gradd_host
//
// Prints each compile event, the training loss beside the stock engine's,
// and the service's statistics; exits 1 if a loss differs.

#include "daemon/host_api.hpp"
#include "gradd/gradd.hpp"

#include <caf/all.hpp>
#include <oneapi/tbb/task_arena.h>
#include <torch/torch.h>
#include <torch/version.h>

#include <unistd.h>

#include <iostream>

namespace {

using namespace std::chrono_literals;

/// Prints every compile event it hears, after `prefix`. (An argument CAF
/// 0.17 needs: it spawns an argument-less function through a null pointer.)
gradd::actors::compile_listener::behavior_type printer(std::string prefix) {
  return {
    [prefix](gradd::actors::compile_event& e) {
      std::cout << prefix << "structure " << std::hex << e.key << std::dec << ", "
                << e.nodes << " nodes, " << (e.ok ? to_string(e.source) : "failed: " + e.error)
                << " in " << e.ms << " ms for " << e.waiters << " request(s)" << std::endl;
    },
  };
}

/// One training step of a small MLP; its loss.
double step(torch::nn::Sequential& model, torch::optim::SGD& optimizer, int i) {
  optimizer.zero_grad();
  torch::manual_seed(i);
  auto loss = model->forward(torch::randn({16, 8})).square().mean();
  loss.backward();
  optimizer.step();
  return loss.item<double>();
}

} // namespace

int main() {
  caf::actor_system_config cfg;
  gradd::actors::configure_actor_system(cfg, 2);
  caf::actor_system system{cfg};
  gradd::actors::adopt_actor_system(system);  // before gradd spawns anything

  gradd::settings policy;
  policy.compile.mode = gradd::compile_mode::sync;
  tbb::task_arena arena(1, 0);
  const std::string token = "host-secret";
  auto service = system.spawn(gradd::daemon::compile_service, policy, token, &arena);
  auto listener = system.spawn(printer, std::string("compile event: "));
  caf::scoped_actor self{system};
  bool welcomed = false;
  self->request(service, 5s, gradd::actors::client_hello{token, GRADD_VERSION, TORCH_VERSION,
                                                         static_cast<int32_t>(::getpid()), -1})
      .receive([&](gradd::actors::daemon_welcome&) { welcomed = true; },
               [&](caf::error& e) { std::cerr << system.render(e) << "\n"; });
  if (!welcomed)
    return 1;
  self->send(service, gradd::actors::subscribe{listener});
  gradd::actors::compile_with(service, token);

  auto make_model = [] {
    torch::manual_seed(0);
    return torch::nn::Sequential(torch::nn::Linear(8, 32), torch::nn::Tanh(),
                                 torch::nn::Linear(32, 1));
  };
  auto stock_model = make_model(), our_model = make_model();
  torch::optim::SGD stock_optimizer(stock_model->parameters(), 0.1);
  torch::optim::SGD our_optimizer(our_model->parameters(), 0.1);
  bool same = true;
  gradd::enable(policy);
  for (int i = 0; i < 5; ++i) {
    double stock = 0;
    {
      gradd::disable_guard off;
      stock = step(stock_model, stock_optimizer, i);
    }
    double ours = step(our_model, our_optimizer, i);
    same = same && stock == ours;
    std::cout << "step " << i << ": loss " << ours << " (stock engine " << stock << ")"
              << std::endl;
  }
  auto ours = gradd::stats();
  gradd::disable();  // gradd's stages leave the host's actor system
  gradd::actors::compile_with({}, "");

  self->request(service, 5s, gradd::actors::status_request{token})
      .receive(
          [&](gradd::actors::daemon_status& s) {
            std::cout << "service: " << s.requests << " request(s), " << s.compiles
                      << " compile(s); gradd: " << ours.plan_backwards << " of "
                      << ours.backwards << " backwards by plans, " << ours.daemon_plans
                      << " plan(s) from the service" << std::endl;
          },
          [&](caf::error& e) { std::cerr << system.render(e) << "\n"; });
  self->send_exit(service, caf::exit_reason::user_shutdown);
  self->send_exit(listener, caf::exit_reason::user_shutdown);
  return same ? 0 : 1;
}
