"""Output files that appear whole or not at all, and never replace a file by surprise.

Data goes to a temporary file beside the target (same directory, so the same filesystem),
which becomes the target only when the block completes; on any error or interrupt it is
removed and the target is left as it was.

How the temporary file becomes the target:

- With ``force``: ``os.replace``, an atomic rename over whatever is there.
- Without ``force``: ``os.link(tmp, path)``, then ``os.unlink(tmp)``. ``link`` fails with
  EEXIST when anything (a file, a symlink, a dangling symlink) appeared at ``path`` after
  the check at the start, for instance a second run writing the same output; a rename
  would replace it silently. The kernel's own no-replace rename, ``renameat2`` with
  ``RENAME_NOREPLACE``, is not in Python's standard library (it would need ctypes and a
  Linux-only syscall number), while hard links work on every POSIX filesystem we target
  (ext4, xfs, btrfs, tmpfs, NFS). A filesystem that refuses hard links (some FUSE, SMB
  and FAT mounts: EPERM, EOPNOTSUPP, ...) gets one clear error naming ``-f``, never a
  silent overwrite.

An existing output that is a character device or a FIFO (``-o /dev/null``) is written in
place with ``force``; renaming a regular file over ``/dev/null`` would be a disaster.
"""

import contextlib
import errno
import os
import stat
import tempfile

from . import signals
from .errors import MambazipError


class OutputExistsError(MambazipError):
    pass


# errno values by which a filesystem says it does not do hard links.
_NO_LINKS = {errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EXDEV, errno.EMLINK}


def same_file(a, b):
    """Whether paths ``a`` and ``b`` (symlinks followed) name one existing file: the same
    path, a hard link, or a symlink to it."""
    try:
        sa, sb = os.stat(a), os.stat(b)
    except OSError:
        return False
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


@contextlib.contextmanager
def atomic_output(path, force=False, mode=None):
    """Yield a binary file that becomes ``path`` only if the block completes (see the module
    docstring). ``mode``: permission bits of the result (default: what a new file gets under
    the current umask)."""
    existing = _lstat(path)
    if existing is not None and not force:
        raise OutputExistsError(f"{path} already exists; use -f to overwrite")
    if existing is not None and stat.S_ISDIR(existing.st_mode):
        raise OutputExistsError(f"{path} is a directory")
    if existing is not None and _writable_in_place(path):
        with open(path, "wb") as f:
            yield f
        return
    directory = os.path.dirname(os.path.abspath(path))
    prefix = "." + os.path.basename(path) + "."
    if mode is None:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    # A signal between creating the file and entering the clean-up below left it behind
    # (CI: SIGHUP sent as soon as the file appeared); held back, it is raised inside.
    signals.hold()
    try:
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=prefix, suffix=".tmp")
    except BaseException:
        signals.release()
        raise
    try:
        signals.release()
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), mode)
            yield f
            f.flush()
            os.fsync(f.fileno())
        if force:
            os.replace(tmp, path)
        else:
            _link_no_replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _link_no_replace(tmp, path):
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise OutputExistsError(
            f"{path} appeared while this ran; not replaced (use -f to overwrite)"
        ) from None
    except OSError as exc:
        if exc.errno in _NO_LINKS:
            raise OutputExistsError(
                f"{path}: this filesystem refuses hard links, which writing without "
                "replacing needs; use -f (the output then replaces any file at that path)"
            ) from None
        raise
    os.unlink(tmp)


def _lstat(path):
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None


def _writable_in_place(path):
    """A character device or FIFO at ``path`` (symlinks followed)."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    return stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode)
