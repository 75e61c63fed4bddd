"""gradd in a Python process on CUDA: plans (and, with cuda_graphs on, CUDA
graphs) serve backwards bitwise; DDP over NCCL on two GPUs. Skipped, and
said so by pytest, without the GPUs."""

import pytest
import torch

import gradd
from checks import GRAPHS, SYNC, all_bits_equal, write_policy
from gradd.bench import ScaledTanh
from test_ddp import train_and_compare

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA not available")
two_gpus = pytest.mark.skipif(torch.cuda.device_count() < 2, reason="fewer than 2 GPUs")


def steps_under_graphs(tmp_path, step, steps):
    """Runs `step(k)` for k in `steps` on the stock engine, then under a
    static-shape graph policy, bitwise step by step (waiting for captures
    between steps); returns gradd's stats() and graph_stats()."""
    stock = [step(k) for k in steps]
    with gradd.enabled(write_policy(tmp_path, GRAPHS)):
        for k, expected in zip(steps, stock):
            assert all_bits_equal(expected, step(k)), f"step {k}"
            gradd.wait_for_compiles()
        return gradd.stats(), gradd.graph_stats()


def mlp_step(model, x):
    for p in model.parameters():
        p.grad = None
    model(x).square().mean().backward()
    torch.cuda.current_stream().synchronize()
    return [p.grad.clone() for p in model.parameters()]


@cuda
@pytest.mark.parametrize("graphs", [False, True])
def test_cuda_backwards_bitwise(tmp_path, graphs):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.GELU(),
                                torch.nn.Linear(64, 8)).cuda()
    x = torch.randn(32, 64, device="cuda")
    stock = mlp_step(model, x)
    text = GRAPHS if graphs else SYNC
    with gradd.enabled(write_policy(tmp_path, text)):
        for _ in range(3):
            ours = mlp_step(model, x)
            gradd.wait_for_compiles()
            assert all_bits_equal(stock, ours)
    s = gradd.stats()
    assert s["plan_backwards"] == 3
    assert (s["graph_backwards"] >= 1) == graphs


@cuda
def test_a_torch_compile_region_under_the_default_policy():
    """AOTAutograd's compiled backward reuses its saved buffers ("donated")
    and raises where it sees retain_graph: the backward gradd keeps for a
    capture must show it the caller's. Bitwise on every step."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.GELU(),
                                torch.nn.Linear(64, 8)).cuda()
    compiled = torch.compile(model)
    x = torch.randn(32, 64, device="cuda")
    stock = mlp_step(compiled, x)  # compiles the backward, with donated buffers
    with gradd.enabled():
        for _ in range(4):
            assert all_bits_equal(stock, mlp_step(compiled, x))
            gradd.wait_for_compiles()
    assert gradd.stats()["raised_backwards"] == 0


@cuda
def test_hooks_on_parameters_run_live_around_graphs(tmp_path):
    """Note [Live leaves]: a clipping tensor hook and a post-accumulate-grad
    hook on parameters. Graphs serve the backwards; each hook runs in the
    stock engine's order and sees the stock engine's gradients, bitwise."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.GELU(),
                                torch.nn.Linear(64, 8)).cuda()
    seen = []
    for i, p in enumerate(model.parameters()):
        p.register_hook(lambda g: g.clamp(-1e-3, 1e-3))
        p.register_post_accumulate_grad_hook(
            lambda p, i=i: seen.append((i, p.grad.clone())))

    def step(k):
        seen.clear()
        x = torch.randn(32, 64, device="cuda", generator=torch.Generator("cuda").manual_seed(k))
        grads = mlp_step(model, x)
        return grads, [i for i, _ in seen], [g for _, g in seen]

    stock = [step(k) for k in range(5)]
    with gradd.enabled(write_policy(tmp_path, GRAPHS)):
        for k in range(5):
            grads, order, hooked = step(k)
            assert order == stock[k][1], f"step {k}"
            assert all_bits_equal(stock[k][0] + stock[k][2], grads + hooked), f"step {k}"
            gradd.wait_for_compiles()
        s, [g] = gradd.stats(), gradd.graph_stats()
    assert s["graph_backwards"] >= 3 and s["piecewise_backwards"] == s["graph_backwards"], s
    assert (g["live_nodes"], g["plans_only"]) == (4, ""), g


@cuda
def test_graphs_cut_at_python_functions_and_activation_hooks(tmp_path):
    """Note [Piecewise graphs]: a custom autograd.Function, a module's full
    backward hook and a hook on an activation. Graphs serve the backwards in
    pieces, those nodes called live between them; gradients and what the
    hooks saw are the stock engine's, bitwise."""
    torch.manual_seed(0)
    first, second = torch.nn.Linear(64, 64).cuda(), torch.nn.Linear(64, 8).cuda()
    seen = []
    second.register_full_backward_hook(lambda m, gi, go: seen.append(go[0].clone()))

    def step(k):
        seen.clear()
        for p in list(first.parameters()) + list(second.parameters()):
            p.grad = None
        x = torch.randn(32, 64, device="cuda", generator=torch.Generator("cuda").manual_seed(k))
        h = ScaledTanh.apply(first(x))  # a Python backward: a PyNode in the graph
        h.register_hook(lambda g: g * 0.5)
        second(h).square().mean().backward()
        torch.cuda.current_stream().synchronize()
        return [p.grad.clone() for p in list(first.parameters()) + list(second.parameters())] + seen

    s, [g] = steps_under_graphs(tmp_path, step, range(5))
    assert s["graph_backwards"] >= 3 and s["piecewise_backwards"] == s["graph_backwards"], s
    assert g["plans_only"] == "" and g["graph_pieces"] >= 3, g
    assert "PyNode" in g["cuts"], g


@cuda
@pytest.mark.parametrize("dropout", [0.0, 0.1])
def test_transformer_encoder_layer_under_graphs(tmp_path, dropout):
    """nn.TransformerEncoderLayer under cuda_graphs, seeded so both engines
    draw the same masks: whole graphs with dropout 0 (the attention's seed
    gets a device stand-in), graphs cut at the attention with dropout 0.1
    (Note [Piecewise graphs]); bitwise either way."""
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(64, 4, 128, dropout=dropout, batch_first=True).cuda()

    def step(k):
        for p in layer.parameters():
            p.grad = None
        torch.manual_seed(100 + k)
        x = torch.randn(8, 16, 64, device="cuda")
        layer(x).square().mean().backward()
        torch.cuda.current_stream().synchronize()
        return [p.grad.clone() for p in layer.parameters()]

    s, [g] = steps_under_graphs(tmp_path, step, range(5))
    assert s["graph_backwards"] >= 3, s
    assert g["plans_only"] == "", g
    if dropout:
        assert s["piecewise_backwards"] == s["graph_backwards"] and "state on the host" in g["cuts"], g
    else:
        assert s["piecewise_backwards"] == 0 and g["graph_pieces"] == 1, g


@cuda
def test_python_numbers_in_ops_under_graphs(tmp_path):
    """Note [Python scalars in graphs]: `0.5 * h` and the like save the number
    as a wrapped CPU tensor (GPT-2's GELU is written so). Graphs serve the
    structure, one per value of the scale, bitwise."""
    torch.manual_seed(0)
    first, last = torch.nn.Linear(64, 64).cuda(), torch.nn.Linear(64, 8).cuda()
    params = list(first.parameters()) + list(last.parameters())

    def step(k, scale):
        for p in params:
            p.grad = None
        x = torch.randn(32, 64, device="cuda", generator=torch.Generator("cuda").manual_seed(k))
        h = first(x)
        h = 0.5 * h * (1.0 + torch.tanh(0.7978845608 * (h + 0.044715 * torch.pow(h, 3.0))))
        (last(h) * scale).square().mean().backward()
        torch.cuda.current_stream().synchronize()
        return [p.grad.clone() for p in params]

    scales = [0.5, 0.5, 0.5, 0.25, 0.25, 0.5, 0.25]
    s, [g] = steps_under_graphs(tmp_path, lambda k: step(k, scales[k]), range(len(scales)))
    assert s["graph_backwards"] >= 4, s
    assert (g["cuda_graphs"], g["plans_only"]) == (2, ""), g


@cuda
def test_device_synchronizes_wait_for_captures(tmp_path):
    """Note [Device synchronizes during captures]: a thread synchronizing the
    device in a loop and a loop synchronizing every step, while each new
    shape is captured in the background: no error, every capture kept."""
    import threading

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.GELU(),
                                torch.nn.Linear(64, 8)).cuda()
    stop, errors = threading.Event(), []

    def synchronize_in_a_loop():
        try:
            while not stop.is_set():
                torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001  (the test reports it)
            errors.append(e)

    text = GRAPHS
    thread = threading.Thread(target=synchronize_in_a_loop)
    thread.start()
    try:
        with gradd.enabled(write_policy(tmp_path, text)):
            for step in range(24):
                x = torch.randn(8 << (step % 4), 64, device="cuda")
                model(x).square().mean().backward()
                torch.cuda.synchronize()
            gradd.wait_for_compiles()
    finally:
        stop.set()
        thread.join()
    assert not errors
    s = gradd.stats()
    # Four batch sizes; `.grad` undefined at the first step is a fifth shape.
    assert s["graph_capture_failures"] == 0 and s["graphs"] >= 4 and s["graph_backwards"] > 0


@cuda
@pytest.mark.parametrize("reentrant", [True, False])
def test_checkpointing_with_dropout_under_graphs(tmp_path, reentrant):
    """Checkpointed residual blocks with dropout under cuda_graphs: bitwise,
    no crash. A reentrant checkpoint's structure holds Python Functions,
    which its graphs are cut at (lifting one would run Python without the
    GIL: that crashed the process)."""
    from torch.utils.checkpoint import checkpoint

    torch.manual_seed(0)
    blocks = torch.nn.ModuleList(
        torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.GELU(), torch.nn.Dropout(0.1),
                            torch.nn.Linear(64, 64)) for _ in range(3)).cuda()

    stem = torch.nn.Linear(64, 64).cuda()  # the blocks' input is an activation

    params = list(stem.parameters()) + list(blocks.parameters())

    def step(i):
        for p in params:
            p.grad = None
        torch.manual_seed(100 + i)
        x = stem(torch.randn(16, 64, device="cuda"))
        for block in blocks:
            x = x + checkpoint(block, x, use_reentrant=reentrant)
        x.square().mean().backward()
        return [p.grad.clone() for p in params]

    s, _ = steps_under_graphs(tmp_path, step, range(6))
    assert s["graph_capture_failures"] == 0
    if reentrant:
        assert s["graph_backwards"] >= 3 and s["piecewise_backwards"] == s["graph_backwards"], s


def test_torch_cuda_synchronize_goes_through_the_capture_gate():
    assert getattr(torch.cuda.synchronize, "_gradd_gate", False)


@cuda
@pytest.mark.parametrize("graphs", [False, True])
def test_ddp_one_nccl_rank_bitwise(tmp_path, graphs):
    """World size 1 over NCCL on one GPU: the reducer's hooks and bucket
    all-reduces run from plans, or live around CUDA graphs (its hooks sit on
    the parameters' AccumulateGrad nodes: Note [Live leaves])."""
    text = GRAPHS if graphs else SYNC
    [stats] = train_and_compare(tmp_path, write_policy(tmp_path, text), "nccl", world=1)
    if graphs:
        assert stats["graph_backwards"] >= 3, stats
        assert stats["piecewise_backwards"] == stats["graph_backwards"], stats


@two_gpus
def test_ddp_two_nccl_ranks_bitwise(tmp_path, sync_policy):
    train_and_compare(tmp_path, sync_policy, "nccl")
