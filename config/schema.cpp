// The policy schema table and the parsers of its value types.

#include "config/schema.hpp"

#include "compiler/pass_manager.hpp"
#include "config/daemon_address.hpp"

#include <algorithm>
#include <limits>

namespace gradd::config {

namespace {

using apply_fn = std::function<std::string(settings&, const std::string&)>;

/// Decimal digits only: YAML 1.1's signs, 0x, 0o, underscores and exponents
/// are all typos in a policy.
bool parse_decimal(const std::string& text, uint64_t& n) {
  if (text.empty() || text.size() > 19 || text.find_first_not_of("0123456789") != std::string::npos)
    return false;
  n = std::stoull(text);
  return true;
}

/// An unsigned integer in [minimum, maximum], stored through `field`.
template <class Field>
apply_fn integer(Field field, uint32_t minimum,
                 uint32_t maximum = std::numeric_limits<uint32_t>::max()) {
  return [=](settings& s, const std::string& text) -> std::string {
    uint64_t n = 0;
    if (parse_decimal(text, n) && n >= minimum && n <= maximum) {
      field(s) = static_cast<uint32_t>(n);
      return {};
    }
    return "expected an integer in [" + std::to_string(minimum) + ", "
           + std::to_string(maximum) + "], got " + quoted(text);
  };
}

template <class Field>
apply_fn boolean(Field field) {
  return [=](settings& s, const std::string& text) -> std::string {
    if (text == "true" || text == "false") {
      field(s) = text == "true";
      return {};
    }
    return "expected true or false, got " + quoted(text);
  };
}

template <class Field>
apply_fn text(Field field) {
  return [=](settings& s, const std::string& value) -> std::string {
    field(s) = value;
    return {};
  };
}

/// One of `names`, stored as the enum value of the same position.
template <class Enum, class Field>
apply_fn choice(Field field, std::vector<std::string> names) {
  return [=](settings& s, const std::string& found) -> std::string {
    for (size_t i = 0; i < names.size(); ++i) {
      if (names[i] == found) {
        field(s) = static_cast<Enum>(i);
        return {};
      }
    }
    std::string allowed;
    for (const auto& n : names)
      allowed += (allowed.empty() ? "" : ", ") + n;
    return "expected one of " + allowed + ", got " + quoted(found);
  };
}

/// The position (from 1) of the first blank name in comma-separated
/// `names`, 0 if none.
size_t first_blank_name(const std::string& names) {
  for (size_t start = 0, item = 1;; ++item) {
    auto end = names.find(',', start);
    auto name = names.substr(start, end == std::string::npos ? end : end - start);
    if (name.find_first_not_of(" \t") == std::string::npos)
      return item;
    if (end == std::string::npos)
      return 0;
    start = end + 1;
  }
}

/// A pass pipeline: every name must be a known pass. "" runs none; a blank
/// name is refused, as the pass manager would skip it and a stray comma
/// may mark a name lost in an edit.
template <class Field>
apply_fn pipeline(Field field) {
  return [=](settings& s, const std::string& names) -> std::string {
    if (auto blank = names.empty() ? 0 : first_blank_name(names))
      return "expected pass names separated by single commas, got " + quoted(names) + " (name "
             + std::to_string(blank) + " is empty)";
    try {
      compiler::pass_manager check(names);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    field(s) = names;
    return {};
  };
}

/// "host:port", as config/daemon_address.hpp parses it.
template <class Field>
apply_fn address(Field field) {
  return [=](settings& s, const std::string& text) -> std::string {
    if (!text.empty() && !parse_daemon_address(text))
      return "expected host:port with a port in [0, 65535], got " + quoted(text);
    field(s) = text;
    return {};
  };
}

#define GRADD_FIELD(member) [](settings& s) -> auto& { return s.member; }

} // namespace

const std::vector<key_spec>& schema() {
  static const std::vector<key_spec> table{
      {"compile", "mode", "async, sync", "async",
       "async: a new graph runs on the stock engine, its plan compiles once that backward is done; sync: it waits",
       choice<compile_mode>(GRADD_FIELD(compile.mode), {"async", "sync"})},
      {"compile", "threads", "integer 1..64", "1",
       "TBB threads for passes and plan building",
       integer(GRADD_FIELD(compile.threads), 1, 64)},
      {"compile", "timeout_ms", "integer >= 1", "10000",
       "a compile running longer counts as failed; sync mode waits at most this long",
       integer(GRADD_FIELD(compile.timeout_ms), 1)},
      {"compile", "delay_ms", "integer >= 0", "0",
       "test knob: every compile first waits this long",
       integer(GRADD_FIELD(compile.delay_ms), 0)},
      {"cache", "max_plans", "integer >= 1", "256",
       "plans kept; the least recently used one goes first (never while it runs)",
       integer(GRADD_FIELD(cache.max_plans), 1)},
      {"cache", "dir", "path", "\"\"",
       "keep compiled plans in this folder too; a later process serves their first backward from them",
       text(GRADD_FIELD(cache.dir))},
      {"fallback", "on_compile_error", "retry_after, never_retry", "retry_after",
       "after a failed compile the stock engine serves that graph for a while, or for good",
       choice<compile_error_policy>(GRADD_FIELD(fallback.on_compile_error),
                                    {"retry_after", "never_retry"})},
      {"fallback", "retry_after_ms", "integer >= 0", "60000",
       "how long a failed graph stays on the stock engine before it compiles again (and a shape "
       "whose CUDA graph capture ran out of memory on its plan)",
       integer(GRADD_FIELD(fallback.retry_after_ms), 0)},
      {"fallback", "on_unsupported", "eager, error", "eager",
       "a backward gradd cannot run (nested tensors, deprecated capture hooks): stock engine, or raise",
       choice<unsupported_policy>(GRADD_FIELD(fallback.on_unsupported), {"eager", "error"})},
      {"fallback", "force_eager", "true, false", "false",
       "serve every backward with the stock engine",
       boolean(GRADD_FIELD(fallback.force_eager))},
      {"nan_check", "enabled", "true, false", "false",
       "after each backward, raise naming the parameters or outputs whose gradients hold NaN",
       boolean(GRADD_FIELD(nan_check.enabled))},
      {"passes", "pipeline", "pass names, comma-separated", "default",
       "the graph passes, in order; default is the seed's end_capture order",
       pipeline(GRADD_FIELD(passes.pipeline))},
      {"passes", "gradient_ready", "true, false", "false",
       "run parameter-gradient paths first (gradient_ready_schedule), sums unchanged",
       boolean(GRADD_FIELD(passes.gradient_ready))},
      {"cuda_graphs", "enabled", "true, false", "true",
       "serve CUDA backwards by replaying CUDA graphs, captured in the background; false: plans only",
       boolean(GRADD_FIELD(cuda_graphs.enabled))},
      {"cuda_graphs", "mode", "static, auto, dynamic", "auto",
       "static: a graph per shape; auto: once a shape recurs, plans if shapes keep changing; dynamic: plans only",
       choice<graph_shape_policy>(GRADD_FIELD(cuda_graphs.mode), {"static", "auto", "dynamic"})},
      {"cuda_graphs", "max_graphs", "integer 1..1024", "8",
       "graphs kept per structure; the least recently used one goes first",
       integer(GRADD_FIELD(cuda_graphs.max_graphs), 1, 1024)},
      {"cuda_graphs", "dynamic_after", "integer >= 1", "16",
       "auto: a structure that has shown this many shapes stays on plans",
       integer(GRADD_FIELD(cuda_graphs.dynamic_after), 1)},
      {"cuda_graphs", "memory_limit_mb", "integer >= 1", "4096",
       "static buffers and memory pools of all graphs; no new capture beyond it",
       integer(GRADD_FIELD(cuda_graphs.memory_limit_mb), 1)},
      {"cuda_graphs", "hand_out", "borrow, copy", "borrow",
       "borrow: .grad is the graph's buffer, copied away only if still held at the next replay; copy: a copy",
       choice<grad_hand_out>(GRADD_FIELD(cuda_graphs.hand_out), {"borrow", "copy"})},
      {"cuda_graphs", "early_launch", "true, false", "true",
       "launch a graph before reading the saved tensors, then check the bet: a structure's one graph once its last two backwards had its shape, or, with several graphs, the one whose shape the loss's node names (Note [Shape probe])",
       boolean(GRADD_FIELD(cuda_graphs.early_launch))},
      {"cuda_graphs", "max_cuts", "integer 0..4096", "64",
       "nodes with hooks, Python autograd.Functions and attention with dropout a backward's graph may be cut at, each called live between two graphs; with more its structure stays on plans; 0: no cuts",
       integer(GRADD_FIELD(cuda_graphs.max_cuts), 0, 4096)},
      {"daemon", "address", "host:port", "\"\"",
       "a process: the gradd daemon that compiles for it (\"\" or port 0: none; $GRADD_DAEMON wins); the daemon: where it listens",
       address(GRADD_FIELD(daemon.address))},
      {"daemon", "token_file", "path", "\"\"",
       "the daemon's token (mode 0600; \"\" = /tmp/gradd-<uid>/token; $GRADD_TOKEN_FILE wins); the daemon creates it",
       text(GRADD_FIELD(daemon.token_file))},
      {"daemon", "timeout_ms", "integer >= 1", "15000",
       "a request to the daemon, its compile included, gives up after this",
       integer(GRADD_FIELD(daemon.timeout_ms), 1)},
      {"daemon", "fallback", "local, stock", "local",
       "while the daemon cannot serve: compile in this process, or the stock engine",
       choice<daemon_fallback>(GRADD_FIELD(daemon.fallback), {"local", "stock"})},
      {"daemon", "retry_after_ms", "integer >= 0", "2000",
       "a daemon that was absent or lost is tried again after this",
       integer(GRADD_FIELD(daemon.retry_after_ms), 0)},
      {"daemon", "agreement_timeout_ms", "integer >= 0", "10000",
       "async compiles: how long a rank's proposal of when to switch to a plan waits for the job's answer (the stock engine serves and the rank proposes again meanwhile), and a backward for the daemon to take in its proposal; the bound of an exchange across machines",
       integer(GRADD_FIELD(daemon.agreement_timeout_ms), 0)},
      {"daemon", "max_clients", "integer >= 1", "256",
       "the daemon: connections it serves at once; more are refused",
       integer(GRADD_FIELD(daemon.max_clients), 1)},
      {"daemon", "max_requests_per_client", "integer >= 1", "64",
       "the daemon: compile requests of one client waiting at once; more are refused",
       integer(GRADD_FIELD(daemon.max_requests_per_client), 1)},
      {"daemon", "max_nodes", "integer >= 1", "1000000",
       "the daemon: nodes of one graph it compiles; larger graphs are refused",
       integer(GRADD_FIELD(daemon.max_nodes), 1)},
      {"daemon", "max_message_mb", "integer >= 1", "256",
       "the largest message to or from the daemon, and the largest plan file read from cache.dir; larger ones are refused unread",
       integer(GRADD_FIELD(daemon.max_message_mb), 1)},
      {"logging", "level", "error, warning, info, debug", "warning",
       "what gradd writes to stderr",
       choice<log_level>(GRADD_FIELD(logging.level), {"error", "warning", "info", "debug"})},
      {"logging", "ir_dump_dir", "path", "\"\"",
       "write each captured graph's IR (text and DOT) here, after capture and each pass",
       text(GRADD_FIELD(logging.ir_dump_dir))},
  };
  return table;
}

#undef GRADD_FIELD

std::string quoted(const std::string& text) {
  // Cut on a character boundary, so the message stays UTF-8.
  size_t cut = std::min<size_t>(text.size(), 60);
  while (cut > 0 && cut < text.size() && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80)
    --cut;
  std::string out = "'";
  for (char c : text.substr(0, cut)) {
    switch (c) {
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\'': out += "\\'"; break;
      default: out += c;
    }
  }
  out += "'";
  if (cut < text.size())
    out += "... (" + std::to_string(text.size()) + " bytes)";
  return out;
}

} // namespace gradd::config
