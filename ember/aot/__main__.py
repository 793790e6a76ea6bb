"""``python -m ember.aot --include-dir | --lib-dir``: where the C runner's headers and
``libember_aot.so`` are, for ``cc app.c -I$(python -m ember.aot --include-dir)
-L$(python -m ember.aot --lib-dir) -lember_aot -ldl``."""

import argparse
import sys

from ember.aot import include_dir, lib_dir


def main(argv: list | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m ember.aot", description=__doc__)
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--include-dir", action="store_true", help="print the include directory")
    g.add_argument("--lib-dir", action="store_true",
                   help="print the directory of libember_aot.so (building it if needed)")
    a = p.parse_args(argv)
    print(include_dir() if a.include_dir else lib_dir())
    return 0


if __name__ == "__main__":
    sys.exit(main())
