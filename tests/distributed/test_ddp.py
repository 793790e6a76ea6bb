"""DistributedDataParallel on 2 ranks equals single-process training on the full batch."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("mpi4py")

import ember  # noqa: E402
from tests.distributed._launch import free_port, launch  # noqa: E402
from tests.distributed.scripts import ddp_mlp  # noqa: E402


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    out = tmp_path_factory.mktemp("ddp")
    proc = launch("ddp_mlp.py", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return [dict(np.load(out / f"rank{r}.npz")) for r in range(2)]


def _single_process() -> tuple:
    net = ddp_mlp.mlp()
    net.load_state_dict(ddp_mlp.initial_state())
    opt = ember.optim.SGD(net.parameters(), lr=0.1)
    X, Y = ddp_mlp.data()
    x, y = ember.tensor(X), ember.tensor(Y)
    losses = []
    for _ in range(ddp_mlp.STEPS):
        opt.zero_grad()
        loss = ((net(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return net, np.array(losses)


def test_ddp_matches_full_batch_training(results):
    net, losses = _single_process()
    for r in range(2):
        np.testing.assert_allclose(results[r]["losses"], losses, rtol=1e-5, atol=1e-6)
        for k, v in net.state_dict().items():
            np.testing.assert_allclose(results[r]["param." + k], v.numpy(), rtol=1e-5,
                                       atol=1e-6)


def test_compiled_step_feeds_the_buckets(results):
    net, losses = _single_process()
    for k, v in net.state_dict().items():
        np.testing.assert_array_equal(results[0]["compiled." + k], results[1]["compiled." + k])
        np.testing.assert_allclose(results[0]["compiled." + k], v.numpy(), rtol=1e-5, atol=1e-6)
    # the ranks' local losses average to the full-batch loss
    avg = (results[0]["compiled_losses"] + results[1]["compiled_losses"]) / 2
    np.testing.assert_allclose(avg, losses, rtol=1e-5, atol=1e-6)


def test_no_sync_accumulates_locally_then_averages(results):
    net, _ = _single_process()  # the state both ranks hold after training
    X, Y = ddp_mlp.data()
    local, synced = [], []
    for r in range(2):
        x, y = ember.tensor(X[4 * r:4 * r + 4]), ember.tensor(Y[4 * r:4 * r + 4])
        net.zero_grad()
        ((net(x) - y) ** 2).mean().backward()
        local.append(net[0].weight.grad.numpy().copy())
        ((net(x * 2) - y) ** 2).mean().backward()
        synced.append(net[0].weight.grad.numpy().copy())
    for r in range(2):
        np.testing.assert_allclose(results[r]["nosync_local"], local[r], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(results[r]["nosync_synced"], (synced[0] + synced[1]) / 2,
                                   rtol=1e-5, atol=1e-6)
    assert not np.allclose(local[0], local[1])  # the ranks' local grads really differ


def test_buckets_start_during_backward(results):
    for r in range(2):
        nb = int(results[r]["buckets"])
        log = results[r]["launch_log"]
        assert nb >= 3
        assert [int(i) for i in log[:, 0]] == list(range(nb))  # in order on every rank
        assert log[0, 1] > 0  # the first bucket started while gradients were still missing
        assert log[-1, 1] == 0


def test_unfinished_reduction_is_an_error(results):
    for r in range(2):
        msg = str(results[r]["unfinished_error"])
        assert msg.startswith("[DistributedDataParallel] Expected to have finished reduction "
                              "in the prior iteration")
        assert "['b.weight', 'b.bias', 'c.weight', 'c.bias']" in msg


def test_find_unused_parameters(results):
    X, _ = ddp_mlp.data()
    ones = [X[4 * r:4 * r + 4].sum(0, keepdims=True) for r in range(2)]  # d sum(a(x)) / d a.w
    for r in range(2):
        np.testing.assert_allclose(results[r]["unused.a"], (ones[0] + ones[1]) / 2, rtol=1e-5)
        np.testing.assert_allclose(results[r]["unused.b"], ones[1] / 2, rtol=1e-5)
        assert results[r]["unused.c_is_none"]


def test_sampler_defaults_to_the_process_group(results):
    pytest.importorskip("torch")
    from torch.utils.data.distributed import DistributedSampler
    for r in range(2):
        want = list(DistributedSampler(range(11), num_replicas=2, rank=r, seed=3))
        assert results[r]["sampler"].tolist() == want


def test_a_torch_gloo_script_runs_unchanged(tmp_path):
    """The same script under the launcher with torch (gloo) and with ember (MPI)."""
    pytest.importorskip("torch")
    out = {}
    for fw in ("torch", "ember"):
        (tmp_path / fw).mkdir()
        # torch's gloo rendezvous listens on MASTER_PORT: a free one, not the shared 29500
        proc = launch("torch_gloo_script.py", fw, str(tmp_path / fw), master_port=free_port())
        if proc.returncode != 0 and fw == "torch":  # the oracle's own TCP rendezvous can race
            proc = launch("torch_gloo_script.py", fw, str(tmp_path / fw),
                          master_port=free_port())
        assert proc.returncode == 0, f"{fw}:\n{proc.stdout}\n{proc.stderr}"
        text = (tmp_path / fw / "result.txt").read_text()
        out[fw] = [json.loads(line) for line in text.splitlines()]
    assert len(out["torch"]) == len(out["ember"]) == 2
    for (e1, loss1, w1), (e2, loss2, w2) in zip(out["torch"], out["ember"]):
        assert e1 == e2
        np.testing.assert_allclose(loss2, loss1, rtol=1e-4, atol=1e-7)
        np.testing.assert_allclose(w2, w1, rtol=1e-5)
