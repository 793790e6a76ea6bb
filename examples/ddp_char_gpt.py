"""The character-level GPT of ``ember demo`` trained data-parallel with DistributedDataParallel.

    python -m ember.distributed.run --nproc-per-node 2 examples/ddp_char_gpt.py --batch 16
    python examples/ddp_char_gpt.py --batch 16          # one process: the same loss curve

``--batch`` is the global batch: every step draws the same ``batch`` windows of text on every
rank (a NumPy generator seeded with ``--seed``), and rank r trains on its ``batch / world``
share.  DDP averages the gradients, so 2 ranks with 8 windows each follow 1 rank with 16; the
printed loss is the average over the ranks (the full batch's loss).  Written against the
PyTorch API (``import ember as torch`` style): ``init_process_group("gloo")``, ``DDP``,
``all_reduce``.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

import ember
import ember.distributed as dist
import ember.nn.functional as F
from ember.demo import CharGPT, load_text
from ember.nn.parallel import DistributedDataParallel as DDP  # noqa: N817 (PyTorch idiom)


def train(steps: int, batch: int, block: int, d: int, layers: int, heads: int, lr: float,
          seed: int, log_every: int = 10) -> list[float]:
    """Train on this process's share of every global batch; returns the global losses."""
    rank, world = dist.get_rank(), dist.get_world_size()
    if batch % world:
        raise SystemExit(f"--batch {batch} must divide by the number of ranks ({world})")
    per = batch // world
    text = load_text()
    chars = sorted(set(text))
    stoi = {c: i for i, c in enumerate(chars)}
    data = ember.tensor([stoi[c] for c in text], dtype=ember.int64)
    ember.manual_seed(seed)
    model = DDP(CharGPT(len(chars), block=block, d=d, layers=layers, heads=heads))
    opt = ember.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    sched = ember.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps)
    draw = np.random.RandomState(seed)
    offsets = ember.arange(block + 1)
    losses: list[float] = []
    start = time.perf_counter()
    for step in range(1, steps + 1):
        ix = draw.randint(0, len(text) - block - 1, size=(batch, 1))  # the global batch
        chunk = data[ember.tensor(ix[rank * per:(rank + 1) * per]) + offsets]
        x, y = chunk[:, :-1], chunk[:, 1:]
        loss = F.cross_entropy(model(x).reshape(-1, len(chars)), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        avg = loss.detach().reshape(1)
        dist.all_reduce(avg, op=dist.ReduceOp.AVG)
        losses.append(avg.item())
        if rank == 0 and (step % log_every == 0 or step == steps):
            rate = step * batch * block / (time.perf_counter() - start)
            print(f"step {step}/{steps}  loss {losses[-1]:.4f}  {rate:,.0f} tokens/s "
                  f"({world} rank(s))", flush=True)
    return losses


def main(argv: list[str] | None = None) -> list[float]:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch", type=int, default=16, help="global batch (all ranks)")
    ap.add_argument("--block", type=int, default=64)
    ap.add_argument("--d", type=int, default=96)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--log-every", type=int, default=10)
    ap.add_argument("--losses", help="write the loss curve (JSON) to this file on rank 0")
    a = ap.parse_args(argv)
    dist.init_process_group("gloo")
    losses = train(a.steps, a.batch, a.block, a.d, a.layers, a.heads, a.lr, a.seed,
                   a.log_every)
    if a.losses and dist.get_rank() == 0:
        with open(a.losses, "w") as f:
            json.dump(losses, f)
    dist.destroy_process_group()
    return losses


if __name__ == "__main__":
    main()
