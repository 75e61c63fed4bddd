#!/usr/bin/env python3
"""Mutation check: does the suite catch deliberate bugs?

Copies the tree (tracked and untracked files, no build folders) to a scratch
folder, builds it once, checks that the suite passes there, then applies
each mutation below in turn (one or more exact text replacements), rebuilds
incrementally, runs the suite (stopping at its first failure) and restores
the files. A mutation the suite does not fail on is reported as MISSED and
makes the script exit 1.

  scripts/mutation_check.py [--scratch DIR | --in-place] [--only NAME ...]

A mutation may name the Catch2 test spec that must catch it (the tests of
what it breaks); without one the whole suite runs. --in-place mutates this
tree and builds in its `build` folder instead of a copy (no full build
first; nothing else may build or edit the tree meanwhile; each file is
restored after its run).

Slow (one incremental build and a test run per mutation: about 1-2 min
each on 2 cores), so not part of CI. Run it before resolving an issue that
touches the engine or the compiler, and put its table in the issue note.
"""

import argparse
import os
import shutil
import subprocess
import sys
import time

# name, why it must be caught, [(file, text, replacement), ...][, test spec]
MUTATIONS = [
    ("hit_runs_stock_engine", "a cache hit served by the stock engine, counters unchanged",
     [("engine/backward_hook.cpp",
       "    else\n      plan(nullptr);\n    run_post_processing(task_);\n",
       "    else\n      task_.captured_vars_ = run_on_stock_engine(root_, task_);\n"
       "    if (served)\n      run_post_processing(task_);\n")]),
    ("key_ignores_hooks", "the structural key leaves hooks out",
     [("capture/graph_walk.cpp",
       "    uint64_t hooks = hook_word(n);\n", "    uint64_t hooks = 0;\n")]),
    ("serialized_ir_drops_captures", "captures left out of the serialized IR",
     [("actors/ir_inspect.hpp", "x.edges, x.captures, x.inputs", "x.edges, x.inputs")]),
    ("documented_default_changed", "schema, README and example say 20000 while the code keeps 10000",
     [("config/schema.cpp", '"integer >= 1", "10000"', '"integer >= 1", "20000"'),
      ("README.md", "| `compile.timeout_ms` | integer >= 1 | `10000` |",
       "| `compile.timeout_ms` | integer >= 1 | `20000` |"),
      ("config/gradd.example.yaml", "  timeout_ms: 10000 ", "  timeout_ms: 20000 ")]),
    ("on_compile_error_ignored", "never_retry treated as retry_after",
     [("actors/registry_actor.cpp",
       "config.fallback.on_compile_error == compile_error_policy::never_retry", "false")]),
    ("retry_after_ms_ignored", "a failed graph waits the default minute whatever the policy",
     [("actors/registry_actor.cpp", "std::chrono::milliseconds(config.fallback.retry_after_ms)",
       "std::chrono::milliseconds(60000)")]),
    ("timeout_ignored", "compile.timeout_ms neither interrupts nor fails a compile",
     [("actors/stage_setup.cpp", "  if (std::chrono::steady_clock::now()\n      > *claimed_at",
       "  if (false && std::chrono::steady_clock::now()\n      > *claimed_at"),
      ("actors/registry_actor.cpp", "if (result.ok() && elapsed <= config.compile.timeout_ms)",
       "if (result.ok())")]),
    ("stock_order_highest_first_broken", "the simulated ready queue takes the lowest sequence number",
     [("compiler/stock_order.cpp", "return a.sequence_nr < b.sequence_nr;",
       "return a.sequence_nr > b.sequence_nr;")]),
    ("stock_order_tie_rule_broken", "ties between equal sequence numbers broken by node id",
     [("compiler/stock_order.cpp", "return a.sequence_nr < b.sequence_nr;",
       "return a.sequence_nr < b.sequence_nr\n        || (a.sequence_nr == b.sequence_nr && a.node > b.node);")]),
    ("reset_leaves_waiters", "reset() drops pending records without waking their waiters",
     [("engine/plan_table.cpp", "    by_id_.clear();\n  }\n  abandon(dropped);",
       "    by_id_.clear();\n  }")]),
    ("raised_not_counted", "a backward that raises is counted nowhere",
     [("engine/backward_hook.cpp",
       "      state_.stats.raised_backwards.fetch_add(1, std::memory_order_relaxed);\n", "")]),
    ("no_exit_handler", "process exit leaves compiles running",
     [("engine/lifecycle.cpp", "      std::atexit([] { instance().at_exit(); });",
       "      (void)0;")]),
    ("plan_skips_post_hooks", "a plan does not call post hooks",
     [("execute/stock_steps.cpp",
       "    return outputs;\n  return call_post_hooks(fn, std::move(outputs), inputs, has_post_hooks);",
       "    return outputs;\n  return outputs;")]),
    ("counts_answered_early", "wait_for_compiles answered before the graphs it waits for settled",
     [("actors/registry_actor.cpp", "auto due = waiting.upper_bound(now.settled);",
       "auto due = waiting.end();")]),
    ("warm_start_ignores_daemon_dir", "a miss asks the daemon for a plan it keeps on disk here",
     [("engine/backward_hook.cpp", "    return daemon_dir && !daemon_dir->empty()",
       "    return false && daemon_dir && !daemon_dir->empty()")]),
    ("concurrent_misses_compile_twice", "a pending structure can be claimed again",
     [("engine/plan_table.cpp",
       "    if (s == graph_state::pending || (s == graph_state::failed && now < r->retry_at))",
       "    if (s == graph_state::failed && now < r->retry_at)")]),
    ("functional_replay_sum_swapped", "a replayed gradient sum adds its terms in the other order",
     [("functional/interpret.cpp",
       "        sum.add(0, std::move(args[0]), stream, stream, node);\n"
       "        sum.add(0, std::move(args[1]), stream, stream, node);\n",
       "        sum.add(0, std::move(args[1]), stream, stream, node);\n"
       "        sum.add(0, std::move(args[0]), stream, stream, node);\n")]),
    ("custom_functions_unmarked", "a custom function's functional is recorded as a built-in's",
     [("functional/recorder.cpp", "bind_functional(fn_name, std::move(fn), is_custom_function);",
       "bind_functional(fn_name, std::move(fn), false);")]),
    ("moves_past_other_uses", "reorder passes move an accumulation past another use of its gradient",
     [("compiler/passes/hook_moves.cpp",
       "auto anchor = static_cast<size_t>(last_touch_before(uses, g.ops[pos], pos));",
       "auto anchor = static_cast<size_t>(def);")]),
    ("compile_sent_during_first_backward", "an async miss sends its compile before the stock engine runs",
     [("engine/backward_hook.cpp",
       "    } else if (config_.compile.mode == compile_mode::sync) {",
       "    } else if (true) {")]),
    # The daemon's wire (daemon/wire_server.cpp, actors/wire_client.cpp).
    ("wire_proof_unchecked", "the daemon welcomes a peer whose proof is of another token",
     [("daemon/wire_server.cpp",
       "      || !same_bytes(proof.mac, client_mac(s.setup.token, s.daemon_nonce, proof.nonce)))",
       "      || false)")], "[wire]"),
    ("wire_nonce_fixed", "the daemon's challenge is the same on every connection (proofs replay)",
     [("daemon/wire_server.cpp", "  s.daemon_nonce = random_bytes(nonce_bytes);",
       "  s.daemon_nonce = std::string(nonce_bytes, 'd');")], "[wire]"),
    ("wire_nonce_length_unchecked", "a proof over a short client nonce is taken",
     [("daemon/wire_server.cpp", "  if (!read_payload(payload, proof) || proof.nonce.size() != nonce_bytes",
       "  if (!read_payload(payload, proof)")], "[wire]"),
    ("wire_requests_before_proof", "the daemon serves requests before the proof",
     [("daemon/wire_server.cpp",
       "    if (header.kind != frame_kind::proof)\n      return drop(self, errc::not_welcomed, \"a request before the proof\");\n    return on_proof(self, payload);",
       "    if (header.kind == frame_kind::proof)\n      return on_proof(self, payload);")], "[wire]"),
    ("wire_handshake_bound_ignored", "frames before the proof may be as large as after it",
     [("daemon/wire_server.cpp", "  frame_reader reader{handshake_frame_bytes};",
       "  frame_reader reader{SIZE_MAX};")], "[wire]"),
    ("wire_message_bound_ignored", "a proven peer's frame has no bound",
     [("daemon/wire_server.cpp", "  s.reader.set_limit(s.setup.max_bytes);",
       "  s.reader.set_limit(SIZE_MAX);")], "[wire]"),
    ("wire_handshake_cap_ignored", "connections in their handshake are not capped",
     [("daemon/wire_server.cpp", "      if (s.handshaking.size() >= max_handshakes) {",
       "      if (false) {")], "[wire]"),
    ("wire_handshake_deadline_ignored", "a connection that never proves the token stays open",
     [("daemon/wire_server.cpp",
       "      if (!self->state.proven)\n        drop(self, errc::not_welcomed,",
       "      if (false)\n        drop(self, errc::not_welcomed,")], "[wire]"),
    ("wire_drops_not_counted", "connections the wire drops are not counted as refusals",
     [("daemon/wire_server.cpp", "  self->send(s.setup.service, peer_refused{});\n", "")], "[wire]"),
    ("wire_client_trusts_any_daemon", "a client believes a daemon that cannot prove the token",
     [("actors/wire_client.cpp",
       "      || !same_bytes(proof.mac, daemon_mac(s.token, s.daemon_nonce, s.client_nonce)))",
       "      || false)")], "[wire]"),
    ("wire_client_answers_before_proof", "a client delivers an answer that came before the daemon's proof",
     [("actors/wire_client.cpp",
       "  if (!s.proven)\n    return broken(self, \"answered before proving it holds the token\");\n", "")],
     "[wire]"),
    ("wire_token_sent", "the client sends the token in its hello",
     [("actors/wire_client.cpp", "      hello.token.clear();  // the proof stands for it\n", "")],
     "[wire]"),
    # Plan files and plans from elsewhere.
    ("plan_checksum_unchecked", "a plan file whose checksum fails is read",
     [("actors/plan_store.cpp",
       "  if (!same_bytes(as_bytes(sha256(body)), std::string_view(*bytes).substr(head.size(), sum.size()))) {",
       "  if (false) {")], "[cache]"),
    ("plan_header_unchecked", "a plan file of another version is read",
     [("actors/plan_store.cpp",
       "bytes->compare(0, head.size(), head) != 0) {", "false) {")], "[cache]"),
    ("plan_links_followed", "a link named as a plan file is followed",
     [("actors/plan_store.cpp", "O_RDONLY | O_NOFOLLOW | O_NONBLOCK", "O_RDONLY | O_NONBLOCK")],
     "[cache]"),
    ("plan_size_unbounded", "a plan file over daemon.max_message_mb is read",
     [("actors/plan_store.cpp", "  else if (static_cast<uint64_t>(info.st_size) > max_bytes)",
       "  else if (false)")], "[cache]"),
    ("plan_not_regular_read", "a directory or FIFO named as a plan file is read",
     [("actors/plan_store.cpp", "  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode))",
       "  if (::fstat(fd, &info) != 0)")], "[cache]"),
    ("foreign_plan_not_rebuilt", "a plan from elsewhere serves without matching its graph's plan",
     [("compiler/foreign_plan.cpp", "    if (p != build_plan(ir))", "    if (false)")], "[cache]"),
    ("foreign_structure_unchecked", "a plan from elsewhere serves another structure",
     [("compiler/foreign_plan.cpp",
       "    if (!same_structure(ir, table) || !same_schedule_inputs(ir, table))",
       "    if (!same_schedule_inputs(ir, table))")], "[cache]"),
    ("daemon_table_unchecked", "the daemon lowers a node table with edges past its nodes",
     [("daemon/compile_service.cpp",
       "  if (auto why = compiler::check_node_table(request.table); !why.empty()) {",
       "  if (auto why = std::string(); !why.empty()) {")], "[wire]"),
    # The token.
    ("token_folder_unchecked", "a token in a folder others can write is read",
     [("config/token_file.cpp", "  if ((info.st_mode & 022) != 0) {", "  if (false) {")], "[token]"),
    ("token_mode_group_readable", "a token file its group can read is read",
     [("config/token_file.cpp", "  if ((info.st_mode & 077) != 0)", "  if ((info.st_mode & 007) != 0)")],
     "[token]"),
    ("token_owner_unchecked", "a token file of another user is read",
     [("config/token_file.cpp", "  if (info.st_uid != ::getuid())\n    refuse(path, \"belongs to another user\");",
       "  if (false)\n    refuse(path, \"belongs to another user\");")], "[token]"),
    # Agreement and exit.
    ("agreeing_rank_loads_plans", "a rank that agrees its switches loads a plan from cache.dir",
     [("engine/backward_hook.cpp", "    if (agrees_with_job())\n      return false;", "")],
     "ranks that share cache.dir*"),
    ("agreement_answer_ignored", "a rank never switches to an agreed plan",
     [("actors/daemon_link.cpp",
       "              if (!me.setup->sink->agree(graph_id, answer.serve_from))",
       "              if (false)")], "ranks compiling asynchronously*"),
    ("exit_runs_stock_engine", "a backward woken by process exit runs the stock engine",
     [("engine/backward_hook.cpp", "      if (state_.exiting())\n        park_until_exit();", "")],
     "[lifecycle]"),
    ("daemon_lru_is_fifo", "the daemon's plan cache evicts the oldest plan, not the least recently used",
     [("daemon/compile_service.cpp", "      s.recency.splice(s.recency.end(), s.recency, entry.used);\n", "")],
     "the daemon's plan cache evicts*"),
    ("current_node_not_set", "nodes a plan runs are not libtorch's current node",
     [("execute/plan_runner.cpp", "    current.enter(fn);\n", "")], "[hooks]"),
    ("late_post_hooks_dropped", "a post-hook registered while its node runs is not called",
     [("execute/stock_steps.cpp", "  if (fn.post_hooks().empty())\n    return outputs;",
       "  if (!has_post_hooks)\n    return outputs;")], "[hooks]"),
    ("create_graph_on_stock_engine", "every create_graph backward runs on the stock engine",
     [("engine/backward_hook.cpp",
       "    if (records_graph_ && reaches_device_threads(walk_->nodes))",
       "    if (records_graph_)")], "[create_graph]"),
    ("rest_miscounts_leaves", "the rest of a recording run past a cut counts its leaves from 0",
     [("functional/interpret.cpp",
       "      leaf += o.kind == op_kind::accumulate_grad;\n", "")], "a recording cut*"),
    ("report_bound_off_by_one", "a client report of as many names as allowed is dropped",
     [("daemon/compile_service.cpp", "report.names.size() > actors::max_report_names",
       "report.names.size() >= actors::max_report_names")],
     "the daemon refuses what breaks its rules*"),
    ("prometheus_all_gauges", "gradd status types every family a gauge",
     [("daemon/status_text.cpp", "(rank_gauge(metric) ? \" gauge\" : \" counter\")",
       "\" gauge\"")], "gradd status types each Prometheus family*"),
    ("help_is_a_mistake", "gradd --help exits 2 as a mistake",
     [("daemon/main.cpp", "  if (o.command == \"-h\" || o.command == \"--help\" || o.command == \"help\")\n    help();",
       "  if (o.command == \"-h\" || o.command == \"--help\" || o.command == \"help\")\n    usage(\"help\");")],
     "gradd --help prints its usage*"),
    ("agreement_rate_of_a_burst", "a proposal's lead comes from the rate of any window, however short",
     [("engine/plan_table.cpp", "  if (now - last_ns < horizon / 4 && !reached) {",
       "  if (false) {")], "a held plan's first proposal*"),
    ("agreement_rate_since_claim", "the first proposal's rate counts from the claim, slow start included",
     [("engine/plan_table.cpp",
       "  proposed_ns.store(std::chrono::steady_clock::now().time_since_epoch().count());\n"
       "  proposed_index.store(index);",
       "  proposed_ns.store(claimed_at.time_since_epoch().count());\n"
       "  proposed_index.store(0);")], "a held plan's first proposal*"),
    ("agreement_never_waits", "a held backward at its proposal runs on without the answer",
     [("engine/plan_table.cpp", "  if (answered_or_ahead())\n    return;", "  return;")],
     "[agreement]"),
    ("agreement_one_store_round", "the machines settle on their first store round, renewals left out",
     [("daemon/agreement.cpp", "    if (a.last_round == found_largest || a.rounds >= max_store_rounds) {",
       "    if (true) {")], "[agreement]"),
]

EXCLUDED = {".git", ".deps", ".whl", ".gl"}


def run(cmd, cwd, timeout=None):
    return subprocess.run(cmd, cwd=cwd, shell=True, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=timeout)


def copy_tree(source, scratch):
    files = run("git ls-files --cached --others --exclude-standard", source).stdout.split()
    for f in files:
        if f.split("/")[0] in EXCLUDED or not os.path.isfile(os.path.join(source, f)):
            continue
        target = os.path.join(scratch, f)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if not os.path.exists(target) or open(os.path.join(source, f), "rb").read() != open(target, "rb").read():
            shutil.copy2(os.path.join(source, f), target)


def build(scratch):
    launcher = "-DCMAKE_CXX_COMPILER_LAUNCHER=ccache" if shutil.which("ccache") else ""
    if not os.path.exists(os.path.join(scratch, "build", "CMakeCache.txt")):
        r = run(f"cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release {launcher}", scratch)
        if r.returncode != 0:
            return r
    return run("cmake --build build -j 2 --target gradd_tests", scratch)


def suite_passes(scratch, spec=""):
    quoted = f" '{spec}'" if spec else ""
    try:
        r = run(f"build/gradd_tests --abort{quoted}", scratch, timeout=900)
    except subprocess.TimeoutExpired:
        return False, "timed out"
    return r.returncode == 0, r.stdout[-2000:]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scratch", default="/tmp/gradd-mutants")
    parser.add_argument("--in-place", action="store_true")
    parser.add_argument("--only", nargs="*", default=None)
    args = parser.parse_args()
    source = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if args.in_place:
        args.scratch = source
    else:
        os.makedirs(args.scratch, exist_ok=True)
        copy_tree(source, args.scratch)

    r = build(args.scratch)
    if r.returncode != 0:
        sys.exit("the unmutated tree does not build:\n" + r.stdout[-3000:])
    if not args.in_place:
        ok, out = suite_passes(args.scratch)
        if not ok:
            sys.exit("the suite fails on the unmutated tree:\n" + out)

    missed = []
    for name, why, edits, *spec in MUTATIONS:
        if args.only and name not in args.only:
            continue
        start = time.time()
        originals = {}
        for path, text, replacement in edits:
            full = os.path.join(args.scratch, path)
            content = originals.setdefault(full, open(full).read())
            current = open(full).read()
            if text not in current:
                sys.exit(f"{name}: '{text}' not found in {path}: update the mutation")
            open(full, "w").write(current.replace(text, replacement, 1))
        try:
            r = build(args.scratch)
            if r.returncode != 0:
                verdict = "caught (does not build)"
            else:
                passed, _ = suite_passes(args.scratch, spec[0] if spec else "")
                verdict = "MISSED" if passed else "caught"
        finally:
            for full, content in originals.items():
                open(full, "w").write(content)
        if verdict == "MISSED":
            missed.append(name)
        print(f"{name:36} {verdict:24} {time.time() - start:5.0f} s  {why}", flush=True)

    build(args.scratch)  # leave the scratch build unmutated for the next run
    print(f"{len(missed)} missed" + (": " + ", ".join(missed) if missed else ""))
    sys.exit(1 if missed else 0)


if __name__ == "__main__":
    main()
