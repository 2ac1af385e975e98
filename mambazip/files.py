"""Output files that appear whole or not at all."""

import contextlib
import os
import tempfile

from .errors import MambazipError


class OutputExistsError(MambazipError):
    pass


@contextlib.contextmanager
def atomic_output(path, force=False, mode=None):
    """Yield a binary file that becomes ``path`` only if the block completes: data goes to a
    temporary file beside it, renamed over ``path`` at the end. On any error or interrupt
    the temporary file is removed and ``path`` is left as it was. ``mode``: permission bits
    of the result (default: what a new file gets under the current umask)."""
    if os.path.lexists(path) and not force:
        raise OutputExistsError(f"{path} already exists; use -f to overwrite")
    directory = os.path.dirname(os.path.abspath(path))
    prefix = "." + os.path.basename(path) + "."
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=prefix, suffix=".tmp")
    if mode is None:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), mode)
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
