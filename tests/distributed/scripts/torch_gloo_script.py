"""A torch.distributed (gloo) training script, run unchanged with torch or ember:
``script.py torch|ember OUT``; rank 0 writes the per-epoch loss and weights to OUT/result.txt."""

import json
import sys

if sys.argv[1] == "ember":
    import ember as torch
    import ember.distributed  # noqa: F401
else:
    import torch
    import torch.utils.data.distributed  # noqa: F401

dist = torch.distributed
DDP = torch.nn.parallel.DistributedDataParallel
DataLoader, TensorDataset = torch.utils.data.DataLoader, torch.utils.data.TensorDataset
DistributedSampler = torch.utils.data.distributed.DistributedSampler

dist.init_process_group(backend="gloo")
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(0)
X = torch.linspace(-1, 1, 64).reshape(32, 2)
Y = X[:, :1] * 3 - X[:, 1:] * 2
model = torch.nn.Linear(2, 1)
with torch.no_grad():
    model.weight.fill_(0.1)
    model.bias.fill_(0.0)
ddp = DDP(model)
opt = torch.optim.SGD(ddp.parameters(), lr=0.5)
sampler = DistributedSampler(TensorDataset(X, Y), shuffle=True, seed=1)
loader = DataLoader(TensorDataset(X, Y), batch_size=4, sampler=sampler)
lines = []
for epoch in range(2):
    sampler.set_epoch(epoch)
    for xb, yb in loader:
        opt.zero_grad()
        loss = ((ddp(xb) - yb) ** 2).mean()
        loss.backward()
        opt.step()
    t = loss.detach().clone()
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    lines.append(json.dumps([epoch, t.item() / world, model.weight.detach().reshape(-1).tolist()]))
if rank == 0:
    with open(f"{sys.argv[2]}/result.txt", "w") as f:
        f.write("\n".join(lines))
dist.barrier()
dist.destroy_process_group()
