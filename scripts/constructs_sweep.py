#!/usr/bin/env python3
"""A user's sweep of autograd constructs on CUDA under gradd's default policy
(graphs on): checkpointing, sparse and complex gradients, hooks, autocast,
GradScaler, an optimizer in a post-accumulate hook, torch.compile, ...
Each case runs on the stock engine twice (a case whose two runs differ is
nondeterministic: NDET), then 6 times under gradd, waiting for compiles
between; gradients (and returned tensors) compared bitwise. Prints one line
per case: OK / DIFF / NDET / EXC, how many runs differed, and who served them.
  there: PYTHONPATH=build-gpu/python python scripts/constructs_sweep.py
(scripts/gpu_build.sh build-gpu gradd_python first). docs/bench/h100-constructs.txt
has a run."""
import copy, sys, traceback, torch, torch.nn as nn, torch.nn.functional as F
import torch.utils.checkpoint as cp
import gradd
D = "cuda"
T = torch.float32

def bits(a, b):
    if a is None or b is None: return a is None and b is None
    if a.is_sparse: a, b = a.coalesce().to_dense(), b.coalesce().to_dense()
    if a.is_complex(): a, b = torch.view_as_real(a), torch.view_as_real(b)
    if (a.dtype, a.shape, a.stride()) != (b.dtype, b.shape, b.stride()): return False
    w = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[a.element_size()]
    return torch.equal(a.contiguous().view(w), b.contiguous().view(w))

def snap(ps): return [None if p.grad is None else p.grad.clone() for p in ps]
def same(x, y): return len(x) == len(y) and all(bits(a, b) if isinstance(a, torch.Tensor) or a is None else a == b for a, b in zip(x, y))

def run(name, make, step, runs=6):
    torch.manual_seed(0)
    ps, ctx = make()
    def once():
        for p in ps: p.grad = None
        torch.manual_seed(1)
        out = step(ps, ctx) or []
        torch.cuda.synchronize()
        return snap(ps) + list(out)
    try:
        ref = once(); ref2 = once()
        nondet = not same(ref, ref2)
        before = gradd.stats()
        bad = 0
        with gradd.enabled():
            for i in range(runs):
                got = once()
                bad += not same(ref, got)
                gradd.wait_for_compiles()
        after = gradd.stats()
        keys = ("plan_backwards", "graph_backwards", "piecewise_backwards", "eager_backwards", "graph_capture_failures", "raised_backwards")
        delta = {k: after[k] - before[k] for k in keys if after[k] != before[k]}
        reasons = {k: v - before["eager_by_reason"].get(k, 0) for k, v in after["eager_by_reason"].items() if v != before["eager_by_reason"].get(k, 0)}
        tag = "OK  " if bad == 0 else ("NDET" if nondet else "DIFF")
        print(f"{tag} {name}: {bad}/{runs} differ {delta} {reasons or ''}", flush=True)
    except Exception as e:
        print(f"EXC {name}: {type(e).__name__}: {str(e)[:300]}", flush=True)
        traceback.print_exc(limit=4)

def lin():
    m = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4)).to(D, T); return list(m.parameters()), m
x8 = torch.randn(5, 8, device=D, dtype=T)

run("plain mlp", lin, lambda ps, m: m(x8).sum().backward())
run("checkpoint reentrant", lin, lambda ps, m: cp.checkpoint(m, x8.clone().requires_grad_(), use_reentrant=True).sum().backward())
run("checkpoint non-reentrant", lin, lambda ps, m: cp.checkpoint(m, x8, use_reentrant=False).sum().backward())
def ckseq():
    m = nn.Sequential(*[nn.Sequential(nn.Linear(16, 16), nn.ReLU()) for _ in range(4)]).to(D, T); return list(m.parameters()), m
x16 = torch.randn(4, 16, device=D, dtype=T)
run("checkpoint_sequential", ckseq, lambda ps, m: cp.checkpoint_sequential(m, 2, x16, use_reentrant=False).sum().backward())
def emb():
    e = nn.Embedding(10, 4, sparse=True).to(D, T); return list(e.parameters()), e
run("sparse embedding", emb, lambda ps, e: e(torch.tensor([1, 2, 2, 5], device=D)).sum().backward())
def embd():
    e = nn.Embedding(10, 4).to(D, T); return list(e.parameters()), e
run("dense embedding", embd, lambda ps, e: e(torch.tensor([1, 2, 2, 5], device=D)).sum().backward())
def cplx():
    w = torch.randn(4, 4, dtype=torch.cfloat, device=D, requires_grad=True); return [w], None
run("complex", cplx, lambda ps, _: (ps[0] @ ps[0].conj().T).abs().sum().backward())
def iv(ps, _):
    y = ps[0] * 2; y.view(16)[3:7].mul_(3); y.t()[1].add_(1); y.sum().backward()
def w44():
    w = torch.randn(4, 4, device=D, dtype=T, requires_grad=True); return [w], None
run("inplace on views", w44, iv)
def retain(ps, m):
    l = m(x8).pow(2).sum(); l.backward(retain_graph=True); l.backward()
run("retain_graph twice", lin, retain)
def penalty(ps, m):
    xi = x8.clone().requires_grad_(); out = m(xi).sum()
    g, = torch.autograd.grad(out, xi, create_graph=True); (out + g.pow(2).sum()).backward()
run("gradient penalty", lin, penalty)
def grad_only(ps, m):
    return list(torch.autograd.grad(m(x8).sum(), ps))
run("autograd.grad", lin, grad_only)
def rnn():
    m = nn.LSTM(6, 8, num_layers=2).to(D, T); return list(m.parameters()), m
xs = torch.randn(7, 3, 6, device=D, dtype=T)
run("lstm (cudnn)", rnn, lambda ps, m: m(xs)[0].sum().backward())
def bn():
    m = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU()).to(D, T); return list(m.parameters()), m
xi = torch.randn(2, 3, 8, 8, device=D, dtype=T)
run("conv bn", bn, lambda ps, m: m(xi).sum().backward())
def enc():
    m = nn.TransformerEncoder(nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True), 2).to(D, T); return list(m.parameters()), m
xe = torch.randn(2, 9, 32, device=D, dtype=T)
run("transformer encoder", enc, lambda ps, m: m(xe).sum().backward())
def enc_drop():
    m = nn.TransformerEncoder(nn.TransformerEncoderLayer(32, 4, 64, dropout=0.1, batch_first=True), 2).to(D, T); return list(m.parameters()), m
run("transformer encoder dropout 0.1", enc_drop, lambda ps, m: m(xe).sum().backward())
def sdpa():
    q = torch.randn(2, 4, 16, 64, device=D, dtype=torch.bfloat16, requires_grad=True); return [q], None
run("sdpa bf16 causal (flash)", sdpa, lambda ps, _: F.scaled_dot_product_attention(ps[0], ps[0], ps[0], is_causal=True).float().sum().backward())
def hooks():
    ps, m = lin()
    m[2].register_full_backward_pre_hook(lambda mod, go: (go[0] * 3,))
    m[0].register_full_backward_hook(lambda mod, gi, go: None)
    ps[1].register_hook(lambda g: g * 2)
    return ps, m
run("module and tensor hooks", hooks, lambda ps, m: m(x8.clone().requires_grad_()).sum().backward())
def saved_hooks(ps, m):
    with torch.autograd.graph.saved_tensors_hooks(lambda t: t * 1, lambda t: t):
        out = m(x8).sum()
    out.backward()
run("saved_tensors_hooks", lin, saved_hooks)
def save_cpu(ps, m):
    with torch.autograd.graph.save_on_cpu(pin_memory=True):
        out = m(x8).sum()
    out.backward()
run("save_on_cpu", lin, save_cpu)
def autocast(ps, m):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        out = m(x8).float().sum()
    out.backward()
run("autocast bf16", lin, autocast)
def scaler():
    ps, m = lin(); return ps, (m, torch.amp.GradScaler("cuda"))
def sc(ps, ctx):
    m, s = ctx
    with torch.autocast("cuda", dtype=torch.float16):
        out = m(x8).float().sum()
    s.scale(out).backward()
run("GradScaler fp16", scaler, sc)
def opt_in_hook():
    ps, m = lin()
    opts = {p: torch.optim.SGD([p], lr=0.1) for p in ps}
    def hook(p):
        opts[p].step(); opts[p].zero_grad()
    for p in ps: p.register_post_accumulate_grad_hook(hook)
    return ps, (m, [p.detach().clone() for p in ps])
def oih(ps, ctx):
    m, state = ctx
    with torch.no_grad():
        for p, s in zip(ps, state): p.copy_(s)
    m(x8).sum().backward()
    return [p.detach().clone() for p in ps]
run("optimizer in post-accumulate hook", opt_in_hook, oih)
def retgrad(ps, m):
    h = m[0](x8); h.retain_grad(); m[2](m[1](h)).sum().backward(); return [h.grad]
run("retain_grad non-leaf", lin, retgrad)
def accum(ps, m):
    for i in range(3): m(x8 * (i + 1)).sum().backward()
run("grad accumulation", lin, accum)
def adam_loop():
    ps, m = lin(); return ps, (m, torch.optim.Adam(ps, lr=1e-3), copy.deepcopy(m.state_dict()))
def al(ps, ctx):
    m, opt, sd = ctx
    m.load_state_dict(sd); opt.state.clear()
    for i in range(3):
        opt.zero_grad(set_to_none=True); m(x8).pow(2).sum().backward(); opt.step()
    return [p.detach().clone() for p in ps]
run("adam 3 steps", adam_loop, al)
def sn():
    m = nn.utils.parametrizations.spectral_norm(nn.Linear(8, 4).to(D, T)); return list(m.parameters()), (m, copy.deepcopy(m.state_dict()))
def snstep(ps, ctx):
    m, sd = ctx; m.load_state_dict(sd); m(x8).sum().backward()
run("spectral_norm", sn, snstep)
def shapes(ps, m):
    for b in (5, 7, 5, 3): m(torch.randn(b, 8, device=D, dtype=T)).sum().backward()
run("changing batch sizes", lin, shapes)
def ctc():
    m = nn.Linear(8, 6).to(D, T); return list(m.parameters()), m
def ctcs(ps, m):
    lp = m(torch.randn(12, 2, 8, device=D)).log_softmax(2)
    F.ctc_loss(lp, torch.randint(1, 6, (2, 5), device=D), torch.tensor([12, 12]), torch.tensor([5, 4])).backward()
run("ctc loss", ctc, ctcs)
def compiled():
    m = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4)).to(D, T); return list(m.parameters()), torch.compile(m)
run("torch.compile forward", compiled, lambda ps, m: m(x8).sum().backward())
print("final", {k: v for k, v in gradd.stats().items() if v and not k.endswith("_ns")})
