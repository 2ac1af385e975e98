"""``mambazip compress``."""

import dataclasses
import os

import click

from .. import codec, container, frames
from ..observe import Report
from ..plan import Layout, Plan
from .common import EXIT_HELP, say
from .options import (
    execution_pack,
    files_pack,
    io_options,
    jobs_options,
    limits_pack,
    memlimit_option,
    parse_frame_size,
    replay_option,
    request_pack,
    save_option,
    train_options,
)
from .policy import Work, each_input
from .progress import compile_note, progress_bar
from .start import check_mamba, check_save, load_start, resolve_start, write_model


@click.command(epilog=EXIT_HELP)
@files_pack
@request_pack
@execution_pack
@limits_pack
@io_options(
    "Overwrite existing outputs; also compress inputs that already end in the suffix, "
    "follow symlinked inputs, read devices and FIFOs, and write compressed data to a "
    "terminal.",
    "Do not store the input's name and mtime in the header.",
)
@train_options
@click.option(
    "--frame-size",
    metavar="SIZE",
    callback=parse_frame_size,
    help=f"Cut the input into frames of SIZE bytes (or 1MiB, 4M: powers of 1024), "
    f"each coded from the same start by a fresh model, so that frames code "
    f"on every core and a slice decodes alone (decompress --range); 0: one "
    f"frame [default: {frames.DEFAULT_FRAME >> 20}MiB; with --save-model, 0].",
)
@click.option(
    "--transforms",
    type=click.Choice(["auto", "none"]),
    default="auto",
    show_default=True,
    help="auto: code deflate streams (gzip, zip, PNG, PDF) as the data they inflate to when "
    "zlib remakes them bit for bit, and x86 code with absolute call targets, undone exactly "
    "on decompression; none: code the bytes as they are (format 6, without transform "
    "records).",
)
@jobs_options
@save_option
@replay_option
@memlimit_option
def compress(io, request, frame_size, transforms, execution, save_model, limits):
    """Compress FILES (- or none: stdin) to FILE.mz. The input's name and modification time
    are stored (see -n). Inputs that already end in .mz are skipped with a note unless -f
    or -o names the output."""
    given = load_start(request.model, io.quiet, limits.memlimit)
    start = resolve_start(request, given, limits.memlimit)
    check_save(save_model, io.files, io.force, output=io.output)
    check_mamba(save_model, start.settings)
    if save_model is not None and frame_size:
        raise click.UsageError(
            "--save-model saves the model the input ends in, and each frame ends in its own: "
            "give --frame-size 0 (the default with --save-model)"
        )
    if frame_size is None:
        frame_size = 0 if save_model is not None else frames.DEFAULT_FRAME
    plan = Plan(start, limits, dataclasses.replace(execution, frame_size=frame_size),
                Layout(stored_blocks=True, small_input=True,
                       transforms=transforms == "auto"))  # fmt: skip

    def run(src, dst, job):
        name = mtime = None
        if not job.stdin and not io.no_name:
            name, mtime = _storable_name(os.path.basename(job.path)), int(job.src_stat.st_mtime)
        with progress_bar(job.size, job.name, io.quiet, io.verbose) as progress:
            source = codec.Source(src, name, mtime, job.size)
            stats = codec.encode(source, dst, plan, Report(progress))
        return write_model(save_model, stats, io.force)

    def after(job, stats, target):
        # Larger because the model coded worse than 8 bits/byte, not because of the header's
        # few hundred bytes (a diverging --lr, bad weights, or incompressible data).
        # NaN bits (non-finite weights) count as worse.
        n = stats.original_bytes
        if not io.quiet and n and stats.compressed_bytes > n and not stats.ideal_bits <= 8 * n:
            say(f"warning: {job.name}: {stats.compressed_bytes} bytes coded, more than the "
                 f"input's {n}: the model needed {stats.ideal_bits / n:.3f} bits/byte")  # fmt: skip

    def skip(path):
        if path.endswith(io.suffix):
            return (f"{path}: already ends in {io.suffix}; unchanged (use -f to compress it "
                    f"anyway)")  # fmt: skip
        return None

    def walked(path):  # -r leaves compressed files alone, as gzip -r does
        return not path.endswith(io.suffix)

    def before(job):  # a signal after the temporary file appears finds the note said
        compile_note(start.settings, io.quiet)

    each_input(io, Work(run, lambda path: path + io.suffix, skip, after, binary_out=True,
                        walked=walked, before=before))  # fmt: skip


def _storable_name(name):
    """``name`` if a header may hold it (``container.valid_name``), else None: not stored."""
    return name if container.valid_name(name) else None
