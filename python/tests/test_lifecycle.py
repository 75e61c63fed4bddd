"""A Python process exits cleanly with gradd loaded and enabled: run as
child processes with a time bound (an exit that hangs or crashes is only
visible from outside)."""

import os
import subprocess
import sys
import textwrap

import pytest

SCENARIOS = {
    # Enabled at exit, plans cached.
    "enabled at exit": """
        gradd.enable(policy)
        for _ in range(3):
            step()
    """,
    # A compile still in flight at exit (each compile waits 2 s first).
    "compile in flight at exit": """
        with open(policy, "a") as f:
            f.write("  delay_ms: 2000\\n")
        gradd.enable(policy)
        step()
    """,
    # sys.exit() inside an enabled scope, from a thread that ran backwards.
    "sys.exit inside a scope": """
        with gradd.enabled(policy):
            t = threading.Thread(target=lambda: [step() for _ in range(3)])
            t.start(); t.join()
            sys.exit(0)
    """,
}


@pytest.mark.parametrize("name", SCENARIOS)
def test_python_process_exits_cleanly(name, tmp_path):
    policy = tmp_path / "policy.yaml"
    policy.write_text("compile:\n  mode: async\n")
    program = textwrap.dedent("""
        import sys, threading, torch, gradd
        policy = sys.argv[1]
        model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
        def step():
            model(torch.randn(4, 8)).sum().backward()
    """) + textwrap.dedent(SCENARIOS[name])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    done = subprocess.run([sys.executable, "-c", program, str(policy)], env=env,
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr[-2000:]
