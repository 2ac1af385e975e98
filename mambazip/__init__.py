"""mambazip: lossless compression by a Mamba-1 byte model trained online on the data it codes.

>>> import mambazip
>>> blob = mambazip.compress(b"hello hello hello")
>>> mambazip.decompress(blob)
b'hello hello hello'
"""

from .codec import Stats, compress_stream, decompress, decompress_stream
from .codec import compress as _compress
from .config import ModelConfig, Settings, TrainConfig, resolve_settings
from .errors import ChecksumError, ConfigError, FormatError, MambazipError, VersionError

__all__ = [
    "ChecksumError",
    "ConfigError",
    "FormatError",
    "MambazipError",
    "ModelConfig",
    "Settings",
    "Stats",
    "TrainConfig",
    "VersionError",
    "compress",
    "compress_stream",
    "decompress",
    "decompress_stream",
    "resolve_settings",
]


def compress(data, settings=None, *, preset="default"):
    """Compress ``data`` (bytes) with ``settings`` (a Settings), or with a preset by name."""
    return _compress(bytes(data), settings or resolve_settings(preset))
