"""gradd's Python demo: a training loop with gradd serving every backward,
beside the same loop on the stock engine. The two loss curves must agree
exactly.

The model uses what Python training code uses: a custom autograd.Function,
a tensor hook (gradient clipping by value), a module full backward hook and
post-accumulate-grad hooks. Two identical copies (same seed) train on the
same batches with Adam; the program prints both losses and gradd's
statistics, and exits non-zero if the losses ever differ.

    make demo                      # runs it after the C++ demo
    python3 examples/train.py 40   # after `make python-install`
"""

import sys

import torch

import gradd


class ScaledTanh(torch.autograd.Function):
    """tanh(x) * 1.5, with its own backward."""

    @staticmethod
    def forward(ctx, x):
        y = torch.tanh(x)
        ctx.save_for_backward(y)
        return y * 1.5

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return grad * 1.5 * (1 - y * y)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.first = torch.nn.Linear(32, 64)
        self.second = torch.nn.Linear(64, 64)
        self.last = torch.nn.Linear(64, 8)

    def forward(self, x):
        h = ScaledTanh.apply(self.first(x))
        h = torch.relu(self.second(h))
        h.register_hook(lambda g: g.clamp(-0.1, 0.1))
        return self.last(h)


def make_trainer():
    torch.manual_seed(0)
    net = Net()
    ready = []
    net.second.register_full_backward_hook(lambda module, gin, gout: None)
    for p in net.parameters():
        p.register_post_accumulate_grad_hook(lambda p: ready.append(p.shape))
    return net, torch.optim.Adam(net.parameters(), lr=1e-3)


def batch(i):
    g = torch.Generator().manual_seed(i % 8)  # eight batches, seen over and over
    x = torch.randn(16, 32, generator=g)
    return x, torch.sin(x[:, :8])


def step(net, optimizer, i):
    optimizer.zero_grad()
    x, target = batch(i)
    loss = (net(x) - target).square().mean()
    loss.backward()
    optimizer.step()
    return loss.item()


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    stock_net, stock_opt = make_trainer()
    net, opt = make_trainer()
    gradd.reset()
    with gradd.enabled():
        for i in range(steps):
            with gradd.disabled():
                stock_loss = step(stock_net, stock_opt, i)
            loss = step(net, opt, i)
            print(f"step {i:3d}  stock {stock_loss:.8f}  gradd {loss:.8f}")
            if loss != stock_loss:
                print("gradd: the losses differ", file=sys.stderr)
                return 1
    stats = gradd.stats()
    print("gradd:", {k: v for k, v in stats.items() if k != "eager_by_reason"},
          {k: v for k, v in stats["eager_by_reason"].items() if v})
    print("gradd: loss curves equal bitwise")
    return 0


if __name__ == "__main__":
    sys.exit(main())
