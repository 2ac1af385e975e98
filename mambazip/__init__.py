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
    "Stats": "codec",
    "compress_stream": "codec",
    "decompress": "codec",
    "decompress_stream": "codec",
    "ModelConfig": "config",
    "Settings": "config",
    "TrainConfig": "config",
    "resolve_settings": "config",
    "ChecksumError": "errors",
    "ConfigError": "errors",
    "FormatError": "errors",
    "MambazipError": "errors",
    "VersionError": "errors",
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


def compress(data, settings=None, *, preset="default"):
    """Compress ``data`` (bytes) with ``settings`` (a Settings, from the seeded init), or
    with a preset by name (from the preset's prior, if it has one and ``data`` looks like
    text)."""
    import io

    from .codec import compress as _compress
    from .codec import compress_stream
    from .config import resolve_settings
    from .priors import for_settings

    if settings is not None:
        return _compress(bytes(data), settings)
    settings = resolve_settings(preset)
    out = io.BytesIO()
    compress_stream(io.BytesIO(bytes(data)), out, settings, prior=for_settings(preset, settings))
    return out.getvalue()
