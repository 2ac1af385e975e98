"""Whether the compiled kernels a run needs are in Numba's cache, known without Numba's
private cache index: after a run has compiled (or loaded) them, ``mark`` leaves a marker file
beside the cache, named by what was compiled and by a digest of the code it was compiled
from, so that an edited or upgraded install, or another NUMBA_CACHE_DIR, has none.
"""

import os
from pathlib import Path

import numba

from .workers import digest_of

_PACKAGE = Path(__file__).resolve().parent
_KERNELS = _PACKAGE / "kernels"


def loops(settings):
    """The compiled loops ``settings`` run: the Mamba's (one byte per step with bptt 1, else
    segments of truncated BPTT) and the context side's."""
    names = []
    if settings.mix is None or settings.mix.mamba:
        names.append("mamba-step" if settings.train.bptt == 1 else "mamba-segments")
    if settings.mix is not None:
        names.append("context-loop")
    return names


def _folder():
    """Where Numba caches the kernels: NUMBA_CACHE_DIR when set, else beside their sources
    when that is writable, else the user's cache folder."""
    if numba.config.CACHE_DIR:
        return Path(numba.config.CACHE_DIR)
    beside = _KERNELS / "__pycache__"
    if os.access(beside if beside.exists() else _KERNELS, os.W_OK):
        return beside
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "mambazip"


def _marker(name):
    # Not workers.code_digest: it is cached on first use, and calling it here would fix the
    # digest a Dask cluster's workers are checked against long before the cluster starts.
    return _folder() / f"mambazip-{name}-{digest_of(_PACKAGE)[:16]}-numba-{numba.__version__}"


def cached(settings):
    """Whether a run with ``settings`` finds its kernels compiled."""
    return all(_marker(name).exists() for name in loops(settings))


def mark(settings):
    """Record that the kernels of ``settings`` are compiled; a cache folder that cannot be
    written only means the compile note shows again."""
    for name in loops(settings):
        try:
            path = _marker(name)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch()
        except OSError:
            pass
