"""A character-level GPT trained on the Python documentation excerpt shipped with ember.

    python examples/char_gpt.py                      # the `ember demo` configuration (~1 min)
    python examples/char_gpt.py --layers 6 --d 384 --heads 6 --block 256 --batch 8
    python examples/char_gpt.py --dtype bfloat16     # CPU autocast (float16: + GradScaler)
    python examples/char_gpt.py --generate           # sample with the compiled KV-cache loop

The model (``ember.demo.CharGPT``: token/position embeddings, pre-norm transformer blocks with
causal ``scaled_dot_product_attention``, tied output embedding) is built from ``ember.nn``
layers and trained with ``optim.AdamW`` and a ``OneCycleLR`` schedule.
"""

from __future__ import annotations

import argparse

from ember.demo import run


def main(argv: list[str] | None = None) -> list[float]:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--steps", type=int, default=1200)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--block", type=int, default=64)
    ap.add_argument("--d", type=int, default=96)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--sample", type=int, default=300, help="characters to generate")
    ap.add_argument("--dtype", choices=("float32", "bfloat16", "float16"), default="float32",
                    help="autocast dtype of the products (float16 also scales the loss)")
    ap.add_argument("--generate", action="store_true",
                    help="sample with the KV cache (CharGPT.generate_cached: one compiled call "
                         "per token, at most --block positions)")
    a = ap.parse_args(argv)
    return run(steps=a.steps, batch=a.batch, block=a.block, d=a.d, layers=a.layers,
               heads=a.heads, lr=a.lr, sample_chars=a.sample, dtype=a.dtype,
               cached=a.generate)


if __name__ == "__main__":
    main()
