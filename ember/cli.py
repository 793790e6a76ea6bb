"""The ``ember`` command: ``ember demo`` (train a char GPT), ``ember info`` and ``ember run``
(the distributed launcher, ``python -m ember.distributed.run``)."""

from __future__ import annotations

import argparse
import os
import platform
import sys
from typing import Sequence


def _info() -> int:
    import ml_dtypes
    import numpy as np

    import ember
    print(f"ember      {ember.__version__} ({os.path.dirname(ember.__file__)})")
    print(f"python     {platform.python_version()} ({sys.executable})")
    print(f"numpy      {np.__version__}")
    print(f"ml_dtypes  {ml_dtypes.__version__}")
    print(f"cpu count  {os.cpu_count()}")
    print(f"threads    {ember.get_num_threads()} (ember kernels and BLAS; ember.set_num_threads)")
    try:
        cfg = np.show_config(mode="dicts")
        blas = cfg.get("Build Dependencies", {}).get("blas", {})
        print(f"blas       {blas.get('name', '?')} {blas.get('version', '')}")
    except Exception as e:  # pragma: no cover - depends on the NumPy build
        print(f"blas       unknown ({e})")
    from ember.compiler.c.build import toolchain
    tc = toolchain.describe()
    print(f"compiler   {tc['compiler']} (EMBER_CC)")
    print(f"cflags     {tc['flags']}")
    print(f"cache      {tc['cache']} (EMBER_CACHE_DIR)")
    print(f"cpu        {tc['cpu']}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["run"]:  # the launcher parses its own (torchrun's) flags
        from ember.distributed.run import main as run_main
        return run_main(argv[1:])
    parser = argparse.ArgumentParser(prog="ember", description="ember command-line tools")
    sub = parser.add_subparsers(dest="cmd")
    sub.add_parser("info", help="print versions, threads, BLAS and the C compiler")
    sub.add_parser("run", help="start N distributed ranks: ember run --nproc-per-node N "
                   "script.py (torchrun's flags)")
    demo = sub.add_parser("demo", help="train a small character-level GPT and print a sample")
    demo.add_argument("--steps", type=int, default=1200)
    demo.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.cmd == "info":
        return _info()
    if args.cmd == "demo":
        from ember.demo import run
        run(steps=args.steps, seed=args.seed)
        return 0
    parser.print_help()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
