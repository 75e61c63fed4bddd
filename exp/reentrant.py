import faulthandler, sys, torch, gradd
from torch.utils.checkpoint import checkpoint
faulthandler.enable()
torch.manual_seed(0)
class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(128, 128), torch.nn.GELU(), torch.nn.Dropout(0.1), torch.nn.Linear(128, 128))
    def forward(self, x):
        return x + self.net(x)
blocks = torch.nn.ModuleList([Block() for _ in range(3)]).cuda()
def step(i, reentrant):
    torch.manual_seed(100 + i)
    x = torch.randn(32, 128, device="cuda", requires_grad=True)
    for b in blocks:
        x = checkpoint(b, x, use_reentrant=reentrant)
    x.square().mean().backward()
    return [p.grad.clone() for p in blocks.parameters()]
for reentrant in (True, False):
    for p in blocks.parameters(): p.grad = None
    stock = [step(i, reentrant) for i in range(8)]
    for p in blocks.parameters(): p.grad = None
    with gradd.enabled(sys.argv[1]):
        ours = []
        for i in range(8):
            ours.append(step(i, reentrant)); gradd.wait_for_compiles()
            print("step", i, "ok", flush=True)
    same = all(torch.equal(a, b) for s, o in zip(stock, ours) for a, b in zip(s, o))
    s = gradd.stats()
    print("reentrant", reentrant, "bitwise", same, {k: s[k] for k in ("plan_backwards", "graph_backwards", "eager_backwards", "graph_capture_failures", "graph_recordings")}, flush=True)
    gradd.reset()
