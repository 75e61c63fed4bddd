// gradd-bench's command line (see bench_options.hpp).

#include "bench/bench_options.hpp"

#include "examples/models.hpp"
#include "gradd/gradd.hpp"

#include <torch/cuda.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <map>
#include <stdexcept>
#include <vector>

namespace gradd::bench {

namespace {

const char* const usage =
    "usage: gradd-bench"
    " [--model {mlp,deep-mlp,convnet,lstm,transformer,wide-mlp,encoder,resnet18}]\n"
    "                   [--device {cpu,cuda}] [--mode {eager,gradd,both}] [--iters N]\n"
    "                   [--warmup W] [--config FILE] [--structures {fixed,sweep}]\n"
    "                   [--shapes {fixed,sweep}] [--dump-ir DIR] [--grad-ready-times]\n"
    "                   [--trace FILE] [--deterministic] [--step-times] [--create-graph]\n"
    "                   [--memory-snapshot PREFIX]\n"
    "A flag's value follows it (--iters 50) or an '=' (--iters=50); each flag once.\n"
    "Without --config the policy comes from $GRADD_CONFIG, or is the default one.\n";

/// The flags that take a value.
const std::vector<std::string> value_flags{"--model",   "--device", "--mode",
                                           "--iters",   "--warmup", "--config",
                                           "--structures", "--shapes", "--dump-ir",
                                           "--trace", "--memory-snapshot"};
/// The flags that take none.
const std::vector<std::string> switch_flags{"--grad-ready-times", "--deterministic",
                                            "--step-times", "--create-graph"};

[[noreturn]] void usage_error(const std::string& message) {
  std::cerr << "gradd-bench: " << message << "\n" << usage;
  std::exit(2);
}

int positive_int(const std::string& flag, const std::string& value, int minimum) {
  try {
    size_t used = 0;
    int n = std::stoi(value, &used);
    if (used == value.size() && n >= minimum)
      return n;
  } catch (const std::exception&) {
  }
  usage_error(flag + " wants an integer >= " + std::to_string(minimum) + ", got '" + value + "'");
}

void require_choice(const std::string& flag, const std::string& value,
                    const std::vector<std::string>& choices) {
  if (std::find(choices.begin(), choices.end(), value) != choices.end())
    return;
  std::string known;
  for (const auto& c : choices)
    known += (known.empty() ? "" : ", ") + c;
  usage_error(flag + " '" + value + "' is not one of: " + known);
}

/// Each flag given, with its value ("" for a switch); exits on --help and
/// on anything malformed.
std::map<std::string, std::string> flags_of(int argc, char** argv) {
  std::map<std::string, std::string> given;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::cout << usage;
      std::exit(0);
    }
    if (arg.rfind("-", 0) != 0)
      usage_error("unexpected argument '" + arg + "'");
    auto equals = arg.find('=');
    auto flag = arg.substr(0, equals);
    bool takes_value =
        std::find(value_flags.begin(), value_flags.end(), flag) != value_flags.end();
    if (!takes_value
        && std::find(switch_flags.begin(), switch_flags.end(), flag) == switch_flags.end())
      usage_error("unknown option '" + flag + "'");
    if (given.count(flag) > 0)
      usage_error(flag + " given twice");
    if (!takes_value && equals != std::string::npos)
      usage_error(flag + " takes no value");
    std::string value;
    if (equals != std::string::npos)
      value = arg.substr(equals + 1);
    else if (takes_value && i + 1 < argc && std::string(argv[i + 1]).rfind("--", 0) != 0)
      value = argv[++i];
    if (takes_value && value.empty())
      usage_error(flag + " needs a value");
    given[flag] = value;
  }
  return given;
}

/// The policy of --config, else of $GRADD_CONFIG, else the default; exits
/// on a bad one. GRADD_CONFIG is not read when --config is given.
gradd::settings policy_of(const std::map<std::string, std::string>& given) {
  try {
    auto config = given.find("--config");
    return config != given.end() ? gradd::load_settings(config->second)
                                 : gradd::default_settings();
  } catch (const gradd::config_error& e) {
    std::cerr << e.what() << "\n";
    std::exit(2);
  }
}

} // namespace

options parse(int argc, char** argv) {
  auto given = flags_of(argc, argv);
  auto value = [&](const std::string& flag, std::string fallback) {
    auto found = given.find(flag);
    return found != given.end() ? found->second : fallback;
  };
  options o;
  o.model = value("--model", o.model);
  o.device = value("--device", o.device);
  o.mode = value("--mode", o.mode);
  o.structures = value("--structures", o.structures);
  o.shapes = value("--shapes", o.shapes);
  o.iters = positive_int("--iters", value("--iters", std::to_string(o.iters)), 1);
  o.warmup = positive_int("--warmup", value("--warmup", std::to_string(o.warmup)), 0);
  o.grad_ready_times = given.count("--grad-ready-times") > 0;
  o.deterministic = given.count("--deterministic") > 0;
  o.step_times = given.count("--step-times") > 0;
  o.create_graph = given.count("--create-graph") > 0;
  o.trace = value("--trace", "");
  o.memory_snapshot = value("--memory-snapshot", "");
  require_choice("--model", o.model, gradd::models::model_names());
  require_choice("--device", o.device, {"cpu", "cuda"});
  require_choice("--mode", o.mode, {"eager", "gradd", "both"});
  require_choice("--structures", o.structures, {"fixed", "sweep"});
  require_choice("--shapes", o.shapes, {"fixed", "sweep"});
  if (o.structures == "sweep" && o.model != "mlp" && o.model != "deep-mlp")
    usage_error("--structures sweep needs --model mlp or deep-mlp");
  o.policy = policy_of(given);
  if (given.count("--dump-ir") > 0)
    o.policy.logging.ir_dump_dir = given["--dump-ir"];
  if (o.device == "cuda" && !torch::cuda::is_available())
    usage_error("--device cuda, but CUDA is not available on this machine");
  return o;
}

} // namespace gradd::bench
