"""mambazip: lossless compression by a Mamba-1 byte model trained online on the data it codes.

>>> import mambazip
>>> blob = mambazip.compress(b"hello hello hello")
>>> mambazip.decompress(blob)
b'hello hello hello'

The names below are imported on first use (PEP 562), so that ``import mambazip`` stays
cheap: the command line installs its signal handlers before NumPy and Numba load
(``mambazip.entry``).
"""

import importlib

_LAZY = {
    "Source": "codec",
    "Stats": "codec",
    "compress_stream": "codec",
    "decode": "codec",
    "decode_range": "codec",
    "decompress": "codec",
    "decompress_stream": "codec",
    "encode": "codec",
    "Execution": "plan",
    "Layout": "plan",
    "Limits": "plan",
    "Plan": "plan",
    "Start": "plan",
    "ModelConfig": "config",
    "Settings": "config",
    "TrainConfig": "config",
    "resolve_settings": "config",
    "ChecksumError": "errors",
    "ConfigError": "errors",
    "FormatError": "errors",
    "MambazipError": "errors",
    "VersionError": "errors",
    "BadMzFileError": "errors",
    "open": "mzfile",
    "register_fsspec": "fsspec_plugin",
}

__all__ = sorted([*_LAZY, "compress"])


def __getattr__(name):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'mambazip' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted([*globals(), *_LAZY])


def compress(data, settings=None, *, preset="default", transforms="auto"):
    """Compress ``data`` (bytes) with ``settings`` (a Settings, from the seeded init), or
    with a preset by name (from the preset's prior, if it has one and ``data`` looks like
    text; an input of at most ``container.SMALL_INPUT`` bytes with the preset's small-input
    settings). A preset's settings and prior are resolved and loaded once per process, so
    that many small records do not each pay for them. ``transforms``: "auto" codes deflate
    streams and x86 code transformed where a transform applies (``mambazip.transforms``),
    "none" the bytes as they are."""
    import io

    from . import plan
    from .codec import encode

    if transforms not in ("auto", "none"):
        raise ValueError(f"transforms must be 'auto' or 'none', got {transforms!r}")
    auto = transforms == "auto"
    if settings is not None:
        start, layout = plan.Start(settings), plan.Layout(transforms=auto)
    else:  # a short input codes with the preset's small-input counterpart
        start, layout = _preset_start(preset), plan.Layout(small_input=True, transforms=auto)
    out = io.BytesIO()
    encode(io.BytesIO(bytes(data)), out, plan.Plan(start, layout=layout))
    return out.getvalue()


_STARTS = {}  # preset name -> its plan.Start (a prior is read-only: every frame starts from it)


def _preset_start(preset):
    from . import plan

    if preset not in _STARTS:
        _STARTS[preset] = plan.start(preset)
    return _STARTS[preset]
