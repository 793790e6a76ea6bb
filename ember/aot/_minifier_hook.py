"""The AOT side of the minifier (issue 16): when a package fails to build or a loaded package
fails to run, ``ember.compiler.minifier.maybe_dump`` (written separately, in
``ember/compiler/minifier*``) gets the chance to write ``minifier_launcher.py`` (it decides
from ``EMBER_MINIFIER`` and ``inductor_configs["aot_inductor.dump_minifier"]``).  Without that
module this does nothing; a failing hook only warns, so the original error is what the user
sees."""

from __future__ import annotations

import warnings
from typing import Any


def dump_for_minifier(stage: str, *, program: Any = None, package: str | None = None,
                      model_name: str | None = None, configs: dict | None = None,
                      error: BaseException | None = None) -> None:
    """``stage``: "aot_compile" (building the package failed) or "aot_run" (a loaded package
    failed); ``program`` the ExportedProgram when at hand, else ``package``/``model_name``."""
    try:
        from ember.compiler import minifier  # type: ignore[attr-defined]
    except ImportError:
        return
    hook = getattr(minifier, "maybe_dump", None)
    if hook is None:
        return
    try:
        hook(stage=stage, program=program, package=package, model_name=model_name,
             configs=dict(configs or {}), error=error)
    except Exception as e:  # noqa: BLE001 - the user's own error matters more
        warnings.warn(f"[aot] the minifier hook failed ({type(e).__name__}: {e})",
                      RuntimeWarning, stacklevel=3)
