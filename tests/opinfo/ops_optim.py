"""OpInfo entry for the multi-tensor optimizer step (``ember/ops/optim_step.py``): ``adam_step``
against torch's single-tensor Adam/AdamW update (``torch.optim.adam._single_tensor_adam``'s
arithmetic, written out with the same torch calls on copies of the state)."""

from __future__ import annotations

from tests.opinfo.core import FLOAT32_64, ErrorCase, OpInfo, Sample, make

SHAPES = [(3, 4), (5,), (), (0, 2)]


def _params(shapes, step, lr, beta1, beta2, wd):
    bc1 = 1 - beta1 ** (step + 1)
    bc2 = 1 - beta2 ** (step + 1)
    return {"decay": 1 - lr * wd if wd else None, "w1": 1 - beta1, "beta2": beta2,
            "w2": 1 - beta2, "eps": 1e-8, "bc2": (bc2 ** 0.5,) * len(shapes),
            "neg_step": (-(lr / bc1),) * len(shapes)}


def _samples(dtype, rng):
    import numpy as np

    cases = ((SHAPES[:2], 0.0, 0.01, {}), (SHAPES, 4.0, 0.0, {}),
             (SHAPES[:1], 9.0, 0.1, {"maximize": True}),
             (SHAPES[:2], 2.0, 0.0, {"coupled_wd": 0.1, "maximize": True}),
             (SHAPES[1:3], 1.0, 0.0, {"coupled_wd": 0.3}))
    for shapes, step, wd, extra in cases:
        args = []
        for s in shapes:
            args += [make(s, dtype, rng), make(s, dtype, rng), make(s, dtype, rng),
                     np.asarray(np.abs(make(s, dtype, rng))), np.asarray(step, dtype=dtype)]
        kw = dict(_params(shapes, step, 1e-2, 0.9, 0.999, wd), **extra)
        yield Sample(tuple(args), kw, desc=f"{len(shapes)} params, step {step}, wd {wd} {extra}",
                     grad=False)


def _adam_step(lib, *tensors, decay, w1, beta2, w2, eps, bc2, neg_step, coupled_wd=None,
               maximize=False):
    if lib.__name__ != "torch":
        from ember.ops.optim_step import ADAM_STEP
        from ember.ops.registry import bind
        return bind(ADAM_STEP, *tensors, decay=decay, w1=w1, beta2=beta2, w2=w2, eps=eps,
                    bc2=bc2, neg_step=neg_step, coupled_wd=coupled_wd, maximize=maximize)
    out = []
    for k in range(0, len(tensors), 5):
        p, g, m, v, s = (t.clone() for t in tensors[k:k + 5])
        s += 1
        if maximize:
            g = -g
        if coupled_wd is not None:
            g = g.add(p, alpha=coupled_wd)
        if decay is not None:
            p.mul_(decay)
        m.lerp_(g, w1)
        v.mul_(beta2).addcmul_(g, g, value=w2)
        denom = (v.sqrt() / bc2[k // 5]).add_(eps)
        p.addcdiv_(m, denom, value=neg_step[k // 5])
        out += [s, p, m, v]
    return tuple(out)


def _errors():
    import numpy as np
    x = np.zeros((2, 3), np.float32)
    s = np.zeros((), np.float32)
    kw = _params([(2, 3)], 0.0, 1e-2, 0.9, 0.999, 0.0)
    return [
        ErrorCase((x, x, x, x), kw, exc=RuntimeError, match=r"\[adam_step\] expected groups of 5"),
        ErrorCase((x, np.zeros((3, 2), np.float32), x, x, s), kw, exc=RuntimeError,
                  match=r"\[adam_step\] parameter 0: grad is float32\[3, 2\]"),
        ErrorCase((x, x, x, x, s), dict(kw, bc2=()), exc=RuntimeError,
                  match=r"\[adam_step\] expected one bc2 and one neg_step per parameter"),
    ]


OPINFOS = [
    OpInfo("adam_step", _adam_step, _samples, dtypes=FLOAT32_64, grad=False, errors=_errors),
]
