// gradd: the daemon, its status, and the launcher.
//
//   gradd daemon [--config FILE] [--address HOST:PORT] [--address-file FILE]
//   gradd status [--config FILE] [--json | --prometheus]
//   gradd launch --nproc N [--config FILE] -- CMD ARGS...
//
// `daemon` serves compiles to the training processes of this machine
// (docs/design.md, "The daemon"): it listens on --address, else
// daemon.address (default 127.0.0.1:29517; port 0 lets the system pick),
// prints where on its first
// line of stdout (and into --address-file), and creates daemon.token_file
// if missing. SIGTERM or SIGINT: refuse new work, finish the compiles
// running, exit 0. SIGHUP: read the policy file again and use it if valid
// (a bad one is logged, and the old one kept).
// `status` asks the daemon of daemon.address ($GRADD_DAEMON) for its
// statistics. `launch` runs N ranks beside a daemon (daemon/launch.hpp).
// Exit status: 0; 1 when the daemon cannot start or be reached; 2 for bad
// arguments or a bad policy; launch: the first failing rank's.

#include "actors/actor_system.hpp"
#include "actors/type_ids.hpp"
#include "actors/wire_client.hpp"
#include "config/daemon_address.hpp"
#include "config/token_file.hpp"
#include "config/usable.hpp"
#include "daemon/compile_service.hpp"
#include "daemon/daemon_log.hpp"
#include "daemon/launch.hpp"
#include "daemon/status_text.hpp"
#include "daemon/wire_server.hpp"
#include "gradd/policy.hpp"

#include <caf/all.hpp>
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/task_arena.h>

#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

namespace {

using namespace gradd;

constexpr const char* default_listen = "127.0.0.1:29517";

struct options {
  std::string command;
  std::string config;
  std::string address;  ///< daemon: overrides daemon.address
  std::string address_file;
  std::string format = "text";
  int ranks = 0;
  std::vector<std::string> rank_command;
};

constexpr const char* usage_text =
    "usage: gradd daemon [--config FILE] [--address HOST:PORT] [--address-file FILE]\n"
    "       gradd status [--config FILE] [--json | --prometheus]\n"
    "       gradd launch --nproc N [--config FILE] -- CMD ARGS...\n";

/// Says what is wrong and how to call gradd; exit status 2.
[[noreturn]] void usage(const std::string& why) {
  std::cerr << "gradd: " << why << "\n" << usage_text;
  std::exit(2);
}

/// `--help`: how to call gradd and what each command does; exit status 0.
[[noreturn]] void help() {
  std::cout
      << usage_text
      << "\n"
         "  daemon  compile backwards for the training processes of this machine, sharing\n"
         "          plans and their cache; prints the address it listens on\n"
         "  status  the daemon's counters and each connected process's own, as text,\n"
         "          JSON or Prometheus text\n"
         "  launch  run N ranks (RANK, LOCAL_RANK, WORLD_SIZE set) beside a daemon, which\n"
         "          it starts unless one answers at daemon.address\n"
         "\n"
         "  --config FILE  a gradd policy (YAML; else $GRADD_CONFIG, else the defaults)\n"
         "  -h, --help     this text\n";
  std::exit(0);
}

options parse(int argc, char** argv) {
  if (argc < 2)
    usage("no command");
  options o;
  o.command = argv[1];
  if (o.command == "-h" || o.command == "--help" || o.command == "help")
    help();
  if (o.command != "daemon" && o.command != "status" && o.command != "launch")
    usage("unknown command '" + o.command + "'");
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-h" || arg == "--help")
      help();
    if (arg == "--" && o.command == "launch") {
      o.rank_command.assign(argv + i + 1, argv + argc);
      break;
    }
    auto value = [&]() -> std::string {
      if (i + 1 >= argc)
        usage(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--config")
      o.config = value();
    else if (arg == "--address-file" && o.command == "daemon")
      o.address_file = value();
    else if (arg == "--address" && o.command == "daemon")
      o.address = value();
    else if (arg == "--nproc" && o.command == "launch") {
      auto n = value();
      if (n.empty() || n.size() > 4 || n.find_first_not_of("0123456789") != std::string::npos
          || std::stoi(n) < 1)
        usage("--nproc needs a number of ranks, 1 or more");
      o.ranks = std::stoi(n);
    }
    else if ((arg == "--json" || arg == "--prometheus") && o.command == "status")
      o.format = arg.substr(2);
    else
      usage("unknown argument '" + arg + "'");
  }
  if (o.address.size() && !parse_daemon_address(o.address))
    usage("--address needs host:port");
  if (o.command == "launch" && (o.ranks == 0 || o.rank_command.empty()))
    usage("launch needs --nproc N and -- CMD");
  return o;
}

/// The policy of --config (else $GRADD_CONFIG, else the defaults), with its
/// folders made and checked as gradd::enable does.
settings policy(const options& o) {
  try {
    auto config = o.config.empty() ? default_settings() : load_settings(o.config);
    check_usable(config);
    return config;
  } catch (const config_error& e) {
    std::cerr << e.what() << "\n";
    std::exit(2);
  }
}

/// Writes `text` into `path` whole: a reader sees the old file or the new.
bool write_whole(const std::string& path, const std::string& text) {
  auto temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::trunc);
    out << text;
    if (!out)
      return false;
  }
  return std::rename(temporary.c_str(), path.c_str()) == 0;
}

int run_daemon(const options& o) {
  // Blocked before any thread starts, so every thread inherits the mask and
  // only sigwait below sees these signals.
  sigset_t signals;
  sigemptyset(&signals);
  for (int s : {SIGTERM, SIGINT, SIGHUP})
    sigaddset(&signals, s);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  auto config = policy(o);
  if (!o.address.empty())
    config.daemon.address = o.address;
  auto listen = parse_daemon_address(config.daemon.address.empty() ? default_listen
                                                                    : config.daemon.address);
  std::string token;
  auto token_path = token_file_path(config);
  try {
    token = read_or_create_token(token_path);
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }

  caf::actor_system_config cfg;
  actors::configure_actor_system(cfg, 2);
  caf::actor_system system{cfg};
  actors::adopt_actor_system(system);  // the plan store serializes with it too
  int threads = static_cast<int>(config.compile.threads);
  tbb::global_control parallelism(tbb::global_control::max_allowed_parallelism, threads + 1);
  tbb::task_arena arena(threads, 0);
  auto service = system.spawn(daemon::compile_service, config, token, &arena);
  auto wire = daemon::serve_wire(system, *listen, service, token, config);
  if (!wire) {
    std::cerr << "gradd daemon: cannot listen on " << to_string(*listen) << ": "
              << system.render(wire.error()) << "\n";
    caf::anon_send_exit(service, caf::exit_reason::user_shutdown);
    return 1;
  }
  auto where = listen->host + ":" + std::to_string(wire->port);
  std::cout << "gradd daemon: listening on " << where << " (token file " << token_path << ")"
            << std::endl;
  if (!o.address_file.empty() && !write_whole(o.address_file, where + "\n")) {
    std::cerr << "gradd daemon: cannot write " << o.address_file << "\n";
    caf::anon_send_exit(service, caf::exit_reason::user_shutdown);
    return 1;
  }
  daemon::log_event(config.logging.level, log_level::info, "listening",
                    {{"address", where}, {"token_file", token_path},
                     {"threads", int64_t{threads}}, {"cache_dir", config.cache.dir}});

  for (;;) {
    int received = 0;
    sigwait(&signals, &received);
    if (received != SIGHUP)
      break;
    if (o.config.empty()) {
      daemon::log_event(config.logging.level, log_level::warning, "reload_refused",
                        {{"why", "started without --config"}});
      continue;
    }
    try {
      auto next = load_settings(o.config);
      check_usable(next);
      if (!o.address.empty())
        next.daemon.address = o.address;  // as at the start
      config.logging = next.logging;
      caf::anon_send(service, daemon::reload{std::move(next)});
    } catch (const config_error& e) {
      daemon::log_event(config.logging.level, log_level::error, "reload_refused",
                        {{"why", std::string(e.what())}});
    }
  }
  caf::anon_send(service, daemon::drain{});
  caf::scoped_actor self{system};
  self->wait_for(service);
  // The sessions still connected end before the actor system does: it
  // waits for none of its actors, and one alive then is never freed.
  std::vector<caf::actor> sessions;
  self->request(wire->server, std::chrono::seconds(5), caf::get_atom::value)
      .receive([&](std::vector<caf::actor>& all) { sessions = std::move(all); },
               [](caf::error&) {});
  sessions.push_back(wire->server);
  for (const auto& actor : sessions) {
    caf::anon_send_exit(actor, caf::exit_reason::user_shutdown);
    self->wait_for(actor);
  }
  system.await_actors_before_shutdown(false);
  daemon::log_event(config.logging.level, log_level::info, "stopped");
  return 0;
}

int run_status(const options& o) {
  auto config = policy(o);
  auto address = configured_daemon(config);
  if (!address) {
    std::cerr << "gradd status: no daemon: set daemon.address or GRADD_DAEMON (host:port)\n";
    return 2;
  }
  std::string token;
  try {
    token = read_token(token_file_path(config));
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
  caf::actor_system_config cfg;
  actors::configure_actor_system(cfg, 1);
  caf::actor_system system{cfg};
  system.await_actors_before_shutdown(false);
  auto daemon = actors::connect_daemon(system, *address, token,
                                       size_t{config.daemon.max_message_mb} << 20);
  if (!daemon) {
    std::cerr << "gradd status: no daemon at " << to_string(*address) << ": "
              << system.render(daemon.error()) << "\n";
    return 1;
  }
  int code = 1;
  caf::scoped_actor self{system};
  self->request(*daemon, std::chrono::seconds(5), actors::status_request{token})
      .receive(
          [&](actors::daemon_status& status) {
            std::cout << daemon::format_status(status, o.format);
            code = 0;
          },
          [&](caf::error& error) {
            std::cerr << "gradd status: " << system.render(error) << "\n";
          });
  caf::anon_send_exit(*daemon, caf::exit_reason::user_shutdown);  // else ~actor_system waits for it
  return code;
}

/// This program's path, for the launcher to start `gradd daemon`.
std::string own_path(const char* argv0) {
  char path[4096];
  auto n = ::readlink("/proc/self/exe", path, sizeof path - 1);
  return n > 0 ? std::string(path, static_cast<size_t>(n)) : std::string(argv0);
}

} // namespace

int main(int argc, char** argv) {
  auto o = parse(argc, argv);
  if (o.command == "launch")
    return daemon::launch(own_path(argv[0]), {o.ranks, o.config, o.rank_command});
  return o.command == "daemon" ? run_daemon(o) : run_status(o);
}
