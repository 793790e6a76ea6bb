"""Rewriting packages for the compatibility and hostile tests."""

import json
import zipfile


def rewrite(src, dst, edit):
    """Copy the zip ``src`` to ``dst`` (entries stored), passing ``(name, data)`` through
    ``edit``, which returns the new ``(name, data)`` or None to drop the entry."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():
            got = edit(info.filename, zin.read(info))
            if got is not None:
                zout.writestr(zipfile.ZipInfo(got[0], date_time=(1980, 1, 1, 0, 0, 0)), got[1])
    return str(dst)


def edit_metadata(src, dst, changes):
    """``src`` with its models' metadata updated by ``changes``."""
    def edit(name, data):
        if name.endswith(".wrapper_metadata.json"):
            meta = json.loads(data)
            meta.update(changes)
            data = json.dumps(meta).encode()
        return name, data
    return rewrite(src, dst, edit)
