"""Inputs and outputs as gzip users expect them: each input in turn (one line per failure,
exit 1 at the end), regular files only without -f, outputs through a temporary file put
in place only when complete, an output that is the input refused, stdin/stdout with -."""

import contextlib
import dataclasses
import os
import stat
import sys

import click

from .. import signals
from ..errors import MambazipError
from ..files import atomic_output
from .common import KB, Discard, describe, say


class Skip(Exception):  # noqa: N818 (not an error)
    """An input left alone on purpose: a note, not an error."""


@dataclasses.dataclass(frozen=True)
class Files:
    """The inputs and how outputs are written, as gzip's options give them."""

    files: tuple
    output: str = None
    to_stdout: bool = False
    force: bool = False
    keep: bool = False
    remove: bool = False
    suffix: str = ".mz"
    no_name: bool = False
    quiet: bool = False
    verbose: bool = False
    recursive: bool = False


@dataclasses.dataclass(frozen=True)
class Work:
    """What a command does with each input: ``run(src, dst, job)`` codes it and returns
    Stats; ``name_output(path)`` names its output; ``skip(path)`` a note to leave it alone
    (or None); ``after(job, stats, target)`` once its output is in place; ``rename(path,
    src)`` names the output from the input's content. ``test``: write nothing;
    ``binary_in``/``binary_out``: refuse a terminal without -f. ``walked(path)``: whether
    a file found under a directory by -r is one to work on. ``before(job)``: once the input
    is open and before any output is, so that what it says precedes any temporary file."""

    run: object
    name_output: object
    skip: object = None
    after: object = None
    rename: object = None
    test: bool = False
    binary_in: bool = False
    binary_out: bool = False
    walked: object = None
    before: object = None


@dataclasses.dataclass
class _Job:
    """One input: its path (- for stdin), the name shown, its stat and size when known."""

    path: str
    stdin: bool
    name: str
    src_stat: os.stat_result = None
    size: int = None


def each_input(io, work):
    """``work`` on each input of ``io`` in turn: one line per failure, exit 1 at the end."""
    files = io.files or ("-",)
    if io.recursive:
        files = tuple(_walk(files, work.walked))
    if io.output is not None and len(files) > 1:
        raise click.UsageError("-o/--output takes one input file")
    if io.output is not None and io.to_stdout:
        raise click.UsageError("-o and -c exclude each other")
    failed = False
    for path in files:
        try:
            signals.check()
            _one(path, io, work)
        except Skip as note:
            if not io.quiet:
                say(f"note: {note}")
        except BrokenPipeError:  # the reader of stdout went away (| head): stop quietly
            raise
        except (MambazipError, OSError, MemoryError) as exc:
            say(describe(path, exc))
            failed = True
    if failed:
        sys.exit(1)


def _walk(paths, wanted):
    """-r: each directory of ``paths`` as the files under it (in name order, as ``gzip -r``
    takes them), ``wanted`` ones only. Symbolic links under a directory are left alone, as
    gzip leaves them; a path given by name is kept as given."""
    for path in paths:
        if path == "-" or not os.path.isdir(path) or os.path.islink(path):
            yield path
            continue
        for top, dirs, names in os.walk(path):
            dirs.sort()
            for name in sorted(names):
                found = os.path.join(top, name)
                if not os.path.islink(found) and (wanted is None or wanted(found)):
                    yield found


def _check_input(path, force):
    """Regular files only, unless -f: not symlinks, devices, FIFOs or sockets."""
    st = os.lstat(path)
    if stat.S_ISDIR(st.st_mode):
        raise MambazipError("is a directory; skipped")
    if force:
        if stat.S_ISLNK(st.st_mode) and stat.S_ISDIR(os.stat(path).st_mode):
            raise MambazipError("is a symbolic link to a directory; skipped")
        return
    if stat.S_ISLNK(st.st_mode):
        raise MambazipError("is a symbolic link; use -f to follow it")
    kinds = {stat.S_ISCHR: "a character device", stat.S_ISBLK: "a block device",
             stat.S_ISFIFO: "a FIFO", stat.S_ISSOCK: "a socket"}  # fmt: skip
    for test, kind in kinds.items():
        if test(st.st_mode):
            raise MambazipError(f"is {kind}, not a regular file; use -f to read it")


def _same_stat(a, b):
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _refuse_same(path, stdin, target, src_stat):
    """An output that is the input is refused, -f or not: writing it would destroy the input
    (and --rm would then delete the only copy)."""
    if target is None:
        return
    if target == "-":
        out = os.fstat(sys.stdout.fileno()) if _has_fileno(sys.stdout) else None
        if out is not None and stat.S_ISREG(out.st_mode) and _same_stat(out, src_stat):
            raise MambazipError("stdout is the input file; nothing written")
        return
    try:
        out = os.stat(target)
    except OSError:
        return
    if (not stdin and target == path) or _same_stat(out, src_stat):
        raise MambazipError(f"the output {target} is the input file; nothing written")


def _has_fileno(stream):
    try:
        stream.fileno()
    except (AttributeError, OSError, ValueError):
        return False
    return True


def refuse_terminal_stdin(force, hint="; use -f to force"):
    if not force and sys.stdin.isatty():
        raise MambazipError(f"compressed data not read from a terminal{hint}")


def _one(path, io, work):
    stdin = path == "-"
    if not stdin:
        _check_input(path, io.force)
    derived = False
    if work.test:
        target = None
    elif io.to_stdout or io.output == "-" or (stdin and io.output is None):
        target = "-"
    else:
        asked = io.output is None and work.skip is not None and not io.force
        if asked and (note := work.skip(path)):
            raise Skip(note)
        derived = io.output is None
        target = io.output or (None if work.rename else work.name_output(path))
    if target == "-" and work.binary_out and sys.stdout.isatty() and not io.force:
        raise MambazipError("compressed data not written to a terminal; use -f to force")
    if stdin and work.binary_in:
        refuse_terminal_stdin(io.force)
    job = _Job(path, stdin, "stdin" if stdin else os.path.basename(path))
    with contextlib.ExitStack() as stack:
        src = sys.stdin.buffer if stdin else stack.enter_context(open(path, "rb"))
        if derived and work.rename:
            target = work.rename(path, src)
        job.src_stat = os.fstat(src.fileno()) if _has_fileno(src) else None
        if job.src_stat is not None:
            _refuse_same(path, stdin, target, job.src_stat)
        regular = job.src_stat is not None and stat.S_ISREG(job.src_stat.st_mode)
        job.size = job.src_stat.st_size if regular else None
        if work.before is not None:
            work.before(job)
        if target is None:
            stats = work.run(src, Discard(), job)
        elif target == "-":
            stats = work.run(src, sys.stdout.buffer, job)
            sys.stdout.buffer.flush()
        else:
            mode = job.src_stat.st_mode & 0o777 if regular and not stdin else None
            with atomic_output(target, io.force, mode) as dst:
                stats = work.run(src, dst, job)
    if work.after is not None:
        work.after(job, stats, target)
    if io.remove and not stdin and target not in (None, "-"):
        os.unlink(path)
    if io.verbose:
        _summary(job.name, stats, work.test)


def _summary(name, stats, test):
    speed = stats.original_bytes / KB / max(stats.seconds, 1e-9)
    status = "OK, " if test else ""
    click.echo(
        f"{name}: {status}{stats.original_bytes} <-> {stats.compressed_bytes} bytes, "
        f"{stats.bits_per_byte:.4f} bits/byte, {stats.seconds:.2f} s, {speed:.2f} KB/s",
        err=True,
    )
