"""``mambazip decompress`` (also ``unmz``, and ``mzcat`` with -c)."""

import contextlib
import dataclasses
import os
import time

import click

from .. import codec, container
from ..errors import MambazipError
from ..observe import Report
from ..plan import Plan
from .common import EXIT_HELP, say
from .options import (
    execution_pack,
    files_pack,
    io_options,
    jobs_options,
    limits_pack,
    memlimit_option,
    model_pack,
    parse_byte_range,
    replay_option,
    save_option,
    start_options,
)
from .policy import Work, each_input
from .progress import compile_note, progress_bar
from .start import check_save, load_start, write_model


@click.command(epilog=EXIT_HELP)
@files_pack
@execution_pack
@model_pack
@limits_pack
@io_options(
    "Overwrite existing outputs; also follow symlinked inputs, read devices and FIFOs, "
    "and read compressed data from a terminal.",
    "Do not restore the stored mtime (or, with -N, name).",
)
@click.option("-N", "--name", "restore_name", is_flag=True,
              help="Name the output by the name stored in the file (its last part only, "
                   "in the input's directory), not the input's name minus the suffix.")  # fmt: skip
@click.option("-t", "--test", is_flag=True, help="Check the files; write nothing.")
@click.option(
    "--range",
    "byte_range",
    metavar="START:END",
    callback=parse_byte_range,
    help="Write only bytes START to END-1 of the original (to stdout unless -o "
    "names a file). A framed file decodes only the frames that hold them.",
)
@jobs_options
@start_options
@save_option
@replay_option
@memlimit_option
def decompress(io, restore_name, test, byte_range, execution, model, save_model, limits):
    """Decompress FILES.mz (- or none: stdin) and verify their checksums; the output gets
    the modification time stored in the file (see -n). Concatenated .mz files decode as one
    output. A file compressed from a starting model needs the same model, given with the
    same option."""
    given = load_start(model, io.quiet, limits.memlimit)
    check_save(save_model, io.files, io.force, output=io.output)
    if byte_range is not None:
        if io.remove:
            raise click.UsageError("--range writes part of the original: --rm would then "
                                   "delete the rest")  # fmt: skip
        if len(io.files) > 1:
            raise click.UsageError("--range takes one input file")
        if save_model is not None:
            raise click.UsageError("--range and --save-model exclude each other")
        io = dataclasses.replace(io, to_stdout=io.to_stdout or io.output is None)
    if save_model is not None:
        # The model a file ends in is that of its one frame, decoded in this process.
        execution = dataclasses.replace(execution, jobs=1)
    plan = Plan(given, limits, execution)

    def run(src, dst, job):
        with progress_bar(None, job.name, io.quiet, io.verbose) as progress:

            def on_header(header):
                if header["settings"] is not None:
                    compile_note(header["settings"], io.quiet)
                progress.set_total(header["size"])

            observer = Report(progress, on_header=on_header)
            if byte_range is not None:
                if not _seekable(src):
                    raise MambazipError("--range needs a file it can seek in, not a pipe")
                stats = codec.decode_range(src, dst, byte_range, plan, observer)
            else:
                stats = codec.decode(src, dst, plan, observer)
        if save_model is not None and stats.frames > 1:
            raise MambazipError(
                f"--save-model: this file has {stats.frames} frames, each ending in its own "
                f"model (compress with --frame-size 0 to save one); nothing written"
            )
        return write_model(save_model, stats, io.force)

    def after(job, stats, target):
        if byte_range is not None:
            return  # a part of the original is not the file the stored mtime belongs to
        if not io.no_name and stats.mtime is not None and target not in (None, "-"):
            with contextlib.suppress(OSError, OverflowError, ValueError):
                if os.path.isfile(target):
                    os.utime(target, (time.time(), stats.mtime))

    def name_output(path):
        suffix = io.suffix
        if not path.endswith(suffix) or path == suffix:
            raise MambazipError(f"unknown suffix, expected {suffix}; use -o to name the output")
        return path[: -len(suffix)]

    def walked(path):  # -r decodes the compressed files under a directory, not the others
        return path.endswith(io.suffix)

    if test:
        tested = dataclasses.replace(io, output=None, to_stdout=False, remove=False)
        each_input(tested, Work(run, name_output, test=True, binary_in=True, walked=walked))
        return
    restored = restore_name and not io.no_name
    rename = _stored_name_output(name_output, io.quiet) if restored else None
    each_input(io, Work(run, name_output, after=after, rename=rename, binary_in=True,
                        walked=walked))  # fmt: skip


def _seekable(f):
    try:
        return f.seekable()
    except (AttributeError, OSError, ValueError):
        return False


def _stored_name_output(name_output, quiet):
    """-N: the output path from the name stored in the header: its last part only, in the
    input's directory, never a path; the usual name when none is stored or it is unusable."""

    def rename(path, src):
        header = container.read_header(src)
        src.seek(0)
        stored = header.get("name")
        base = os.path.basename(stored) if isinstance(stored, str) else ""
        if base in ("", ".", "..") or "\0" in base:
            if stored is not None and not quiet:
                say(f"note: {path}: stored name {stored!r} is not usable; using the file's")
            return name_output(path)
        return os.path.join(os.path.dirname(path), base)

    return rename
