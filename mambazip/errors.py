"""Typed errors: the library raises them, the CLI turns each into one line and an exit code."""


class MambazipError(Exception):
    """Base of every error a user can cause with bad input."""


class ConfigError(MambazipError):
    """Invalid model shape or training settings."""


class FormatError(MambazipError):
    """Not a mambazip file, or a corrupt or truncated one."""


class BadMzFileError(FormatError, OSError):
    """A damaged or truncated file met by ``mambazip.open``: an ``OSError``, as
    ``gzip.BadGzipFile`` is, so that code written for Python's file objects catches it."""


class VersionError(FormatError):
    """A file written by a newer format version than this release reads."""


class ChecksumError(MambazipError):
    """Decoded data does not match the checksum stored in the file."""


class CheckpointError(MambazipError):
    """A model file that cannot be read, or does not fit the file being decompressed."""


class MemoryLimitError(MambazipError):
    """A file or model would need more memory than the limit allows (``--memlimit``)."""


class RangeError(MambazipError):
    """A slice of the original that the file does not hold (``--range``)."""
