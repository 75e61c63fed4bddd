// gradd-daemon-rtt: the round trip of one compile request to a running
// `gradd daemon`, for a structure it already holds (what every rank but
// the first pays per new structure), as one JSON line:
//
//   {"requests": 2000, "median_us": 180.1, "p99_us": 260.3}
//
//   GRADD_DAEMON=host:port GRADD_TOKEN_FILE=... gradd-daemon-rtt [REQUESTS]

#include "actors/actor_system.hpp"
#include "actors/daemon_protocol.hpp"
#include "actors/type_ids.hpp"
#include "actors/wire_client.hpp"
#include "bench/node_tables.hpp"
#include "config/daemon_address.hpp"
#include "config/token_file.hpp"

#include <caf/all.hpp>
#include <torch/version.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <vector>

int main(int argc, char** argv) {
  int requests = argc > 1 ? std::atoi(argv[1]) : 2000;
  gradd::settings defaults;
  auto address = gradd::configured_daemon(defaults);
  if (!address || requests < 1) {
    std::cerr << "usage: GRADD_DAEMON=host:port gradd-daemon-rtt [REQUESTS]\n";
    return 2;
  }
  caf::actor_system_config cfg;
  gradd::actors::configure_actor_system(cfg, 1);
  caf::actor_system system{cfg};
  system.await_actors_before_shutdown(false);
  auto token = gradd::read_token(gradd::token_file_path(defaults));
  auto daemon = gradd::actors::connect_daemon(system, *address, token,
                                              size_t{defaults.daemon.max_message_mb} << 20);
  if (!daemon) {
    std::cerr << "gradd-daemon-rtt: " << system.render(daemon.error()) << "\n";
    return 1;
  }
  caf::scoped_actor self{system};
  bool ok = true;
  auto fail = [&](caf::error& e) {
    std::cerr << "gradd-daemon-rtt: " << system.render(e) << "\n";
    ok = false;
  };
  self->request(*daemon, std::chrono::seconds(10),
                gradd::actors::client_hello{token, GRADD_VERSION, TORCH_VERSION, 0, -1})
      .receive([](gradd::actors::daemon_welcome&) {}, fail);
  gradd::actors::compile_request request{"default", gradd::measure::chain_table(16)};
  std::vector<double> micros;
  for (int i = 0; ok && i < requests + 10; ++i) {  // the first compiles; 10 warm up
    auto start = std::chrono::steady_clock::now();
    self->request(*daemon, std::chrono::seconds(10), request)
        .receive([](gradd::actors::compiled_plan&) {}, fail);
    if (i >= 10)
      micros.push_back(std::chrono::duration<double, std::micro>(
                           std::chrono::steady_clock::now() - start)
                           .count());
  }
  caf::anon_send_exit(*daemon, caf::exit_reason::user_shutdown);  // else ~actor_system waits for it
  if (!ok)
    return 1;
  std::sort(micros.begin(), micros.end());
  std::printf("{\"requests\": %d, \"median_us\": %.1f, \"p99_us\": %.1f}\n", requests,
              micros[micros.size() / 2], micros[micros.size() * 99 / 100]);
  return 0;
}
