"""DDP on 2 ranks: each rank trains on its half of the batch; saves losses, params, grads."""

import sys

import numpy as np

import ember
import ember.distributed as dist
from ember.nn.parallel import DistributedDataParallel as DDP
from ember.utils.data.distributed import DistributedSampler

STEPS = 5


def data() -> tuple:
    g = np.random.default_rng(0)
    return (g.standard_normal((8, 4)).astype(np.float32),
            g.standard_normal((8, 1)).astype(np.float32))


def mlp() -> ember.nn.Module:
    return ember.nn.Sequential(ember.nn.Linear(4, 16), ember.nn.Tanh(), ember.nn.Linear(16, 1))


def initial_state() -> dict:
    g = np.random.default_rng(1)
    return {k: ember.tensor(g.standard_normal(tuple(v.shape)).astype(np.float32) * 0.5)
            for k, v in mlp().state_dict().items()}


class TwoHeads(ember.nn.Module):
    """``a`` is used on every rank, ``b`` only on rank 1, ``c`` never."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b, self.c = (ember.nn.Linear(4, 1) for _ in range(3))

    def forward(self, x: ember.Tensor, use_b: bool) -> ember.Tensor:
        return self.a(x) + self.b(x) if use_b else self.a(x)


def unused_parameters(res: dict, x: ember.Tensor, rank: int) -> None:
    ember.manual_seed(0)
    model = DDP(TwoHeads(), find_unused_parameters=True)
    model(x, rank == 1).sum().backward()
    net = model.module
    res["unused.a"] = net.a.weight.grad.numpy()
    res["unused.b"] = net.b.weight.grad.numpy()
    res["unused.c_is_none"] = np.array(net.c.weight.grad is None)


def compiled(res: dict, x: ember.Tensor, y: ember.Tensor) -> None:
    """A compiled training step (forward, backward, SGD step in one ember.compile call): its
    gradients feed DDP's buckets like eager ones."""
    net = mlp()
    net.load_state_dict(initial_state())
    model = DDP(net, bucket_cap_mb=0.0001)
    opt = ember.optim.SGD(model.parameters(), lr=0.1)

    @ember.compile
    def step() -> ember.Tensor:
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        return loss

    res["compiled_losses"] = np.array([step().item() for _ in range(STEPS)])
    for k, v in net.state_dict().items():
        res["compiled." + k] = v.numpy()


def main(out: str) -> None:
    dist.init_process_group("gloo")
    r, n = dist.get_rank(), dist.get_world_size()
    ember.manual_seed(100 + r)
    net = mlp()
    if r == 0:  # only rank 0 has the reference start: DDP must broadcast it
        net.load_state_dict(initial_state())
    model = DDP(net, bucket_cap_mb=0.0001)  # three buckets
    opt = ember.optim.SGD(model.parameters(), lr=0.1)
    X, Y = data()
    per = len(X) // n
    x, y = ember.tensor(X[r * per:(r + 1) * per]), ember.tensor(Y[r * per:(r + 1) * per])
    res = {}
    losses = []
    for _ in range(STEPS):
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        t = loss.detach().reshape(1)
        dist.all_reduce(t, op=dist.ReduceOp.AVG)
        losses.append(t.item())
    res["losses"] = np.array(losses)
    # overlap: the first bucket started while gradients were still missing
    res["buckets"] = np.array(len(model._buckets))
    res["launch_log"] = np.array(model.launch_log[-len(model._buckets):])
    for k, v in net.state_dict().items():
        res["param." + k] = v.numpy()
    # no_sync: a local backward, then a synchronized one averages the accumulated sums
    opt.zero_grad()
    with model.no_sync():
        ((model(x) - y) ** 2).mean().backward()
    res["nosync_local"] = net[0].weight.grad.numpy().copy()
    ((model(x * 2) - y) ** 2).mean().backward()
    res["nosync_synced"] = net[0].weight.grad.numpy().copy()
    unused_parameters(res, x, r)
    compiled(res, x, y)
    strict = DDP(TwoHeads())
    strict(x, False).sum().backward()  # b and c get no gradient: the reduction cannot finish
    try:
        strict(x, False)
        res["unfinished_error"] = np.array("no error")
    except RuntimeError as e:
        res["unfinished_error"] = np.array(str(e))
    res["sampler"] = np.array(list(DistributedSampler(range(11), seed=3)))
    np.savez(f"{out}/rank{r}.npz", **res)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
