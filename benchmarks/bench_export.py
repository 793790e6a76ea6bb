"""Export time: ``ember.export.export`` against ``torch.export.export`` (issue 15's goal: at most
0.5x torch's time) on the demo's char GPT and a MiniLM-sized BERT, both with a dynamic batch and
sequence length.

A second table times the compiled exported program (``ember.compile(ep.module())``) against
``ember.compile`` of the same module (issue 15: "as fast"); ``--compiled`` runs only that one.

Run: ``python benchmarks/bench_export.py``.  The torch side runs the very same model source:
``ember/demo.py``'s ``Block``/``CharGPT`` and ``examples/minilm.py``'s ``BertModel`` are executed
once more with ``torch`` bound in place of ``ember`` (their weights are random; export time does
not depend on them).  Each export is timed whole (tracing, guards, building the program), ember
and torch alternately, median of the rounds.
"""

from __future__ import annotations

import logging
import os
import sys
import types
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import torch  # noqa: E402
from common import compare, fmt_time  # noqa: E402

import ember  # noqa: E402
import ember.demo  # noqa: E402

logging.getLogger("torch").setLevel(logging.ERROR)


def _as_torch(path: str, names: list[str]) -> types.SimpleNamespace:
    """The classes ``names`` of the ember source file ``path``, re-executed against torch."""
    src = open(path).read()
    for old, new in (("import ember.nn.functional as F", "import torch.nn.functional as F"),
                     ("import ember as torch", "import torch"),
                     ("from ember import Tensor, nn", "from torch import Tensor, nn"),
                     ("from ember.utils.safetensors import load_file",
                      "from safetensors.torch import load_file"),
                     ("from ember import nn", "from torch import nn"),
                     ("import ember.nn.functional as F", "import torch.nn.functional as F"),
                     ("import ember\n", "import torch as ember\n")):
        src = src.replace(old, new)
    mod = types.ModuleType(f"torch_peer_{os.path.basename(path)[:-3]}")
    sys.modules[mod.__name__] = mod  # dataclasses look their module up
    exec(compile(src, path + " (torch)", "exec"), mod.__dict__)  # noqa: S102 (our own source)
    return types.SimpleNamespace(**{n: getattr(mod, n) for n in names})


def main() -> None:
    demo = _as_torch(os.path.join(ROOT, "ember", "demo.py"), ["CharGPT"])
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    import minilm
    tminilm = _as_torch(os.path.join(ROOT, "examples", "minilm.py"), ["BertModel"])
    cfg = minilm.BertConfig()

    def gpt_case(T, Dim, make):
        T.manual_seed(0)
        m = make(65, block=64, d=96, layers=2, heads=4).eval()
        idx = T.randint(0, 65, (4, 32))
        spec = {"idx": {0: Dim("b"), 1: Dim("t", max=64)}}
        return lambda: T.export.export(m, (idx,), dynamic_shapes=spec)

    def bert_case(T, Dim, make):
        T.manual_seed(0)
        m = make(cfg).eval()
        ids, mask = T.randint(1, 1000, (2, 16)), T.ones(2, 16, dtype=T.int64)
        b, s = Dim("b"), Dim("s", max=512)
        spec = {"input_ids": {0: b, 1: s}, "attention_mask": {0: b, 1: s}}
        return lambda: T.export.export(m, (ids, mask), dynamic_shapes=spec)

    cases = {
        "char GPT (2 layers, d=96)": (gpt_case(ember, ember.export.Dim, ember.demo.CharGPT),
                                      gpt_case(torch, torch.export.Dim, demo.CharGPT), 1),
        "MiniLM-sized BERT (6 layers, 384)": (
            bert_case(ember, ember.export.Dim, minilm.BertModel),
            bert_case(torch, torch.export.Dim, tminilm.BertModel), 1),
    }
    print(f"{'model':36} {'ember':>10} {'torch':>10} {'ember/torch':>12}")
    for name, te, tt, ratio in compare(cases, rounds=5, warmup=1):
        print(f"{name:36} {fmt_time(te):>10} {fmt_time(tt):>10} {ratio:>12.3f}")
    compiled_runs()


def compiled_runs() -> None:
    """The compiled exported program (``ember.compile(ep.module())``: one size-generic C entry,
    no retracing; a training step runs its compiled forward/backward pair) against
    ``ember.compile`` of the same module, same inputs: inference under ``no_grad``, and a
    forward+backward step."""
    from ember.export import Dim

    def gpt(make_input):
        ember.manual_seed(0)
        m = ember.demo.CharGPT(65, block=64, d=96, layers=2, heads=4).eval()
        ep = ember.export.export(m, (ember.randint(0, 65, (4, 32)),),
                                 dynamic_shapes={"idx": {0: Dim.AUTO, 1: Dim("t", max=64)}})
        return ember.compile(ep.module()), ember.compile(m), make_input

    def mlp(make_input):
        ember.manual_seed(0)
        m = ember.nn.Sequential(ember.nn.Linear(64, 256), ember.nn.GELU(),
                                ember.nn.Linear(256, 64)).eval()
        ep = ember.export.export(m, (ember.randn(32, 64),),
                                 dynamic_shapes={"input": {0: Dim.AUTO}})
        return ember.compile(ep.module()), ember.compile(m), make_input

    def train_step(f: Any, x: Any) -> None:  # forward + backward (grads accumulate)
        f(x).float().mean().backward()

    cases = {}
    for name, (ce, cc, mk), train in (
            ("char GPT fwd (8, 48)", gpt(lambda: ember.randint(0, 65, (8, 48))), False),
            ("MLP 64-256-64 fwd (batch 256)", mlp(lambda: ember.randn(256, 64)), False),
            ("char GPT fwd+bwd (8, 48)", gpt(lambda: ember.randint(0, 65, (8, 48))), True),
            ("MLP 64-256-64 fwd+bwd (batch 256)", mlp(lambda: ember.randn(256, 64)), True)):
        x = mk()

        def run(f, x=x, train=train):
            if train:
                train_step(f, x)
                return
            with ember.no_grad():
                f(x)
        cases[name] = (lambda ce=ce, run=run: run(ce), lambda cc=cc, run=run: run(cc), 20)
    print(f"\n{'compiled model':36} {'exported':>10} {'compile':>10} {'ratio':>12}")
    for name, te, tt, ratio in compare(cases, rounds=5, warmup=2):
        print(f"{name:36} {fmt_time(te):>10} {fmt_time(tt):>10} {ratio:>12.3f}")


if __name__ == "__main__":
    if "--compiled" in sys.argv:
        compiled_runs()
    else:
        main()
