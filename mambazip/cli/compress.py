"""``mambazip compress``."""

import os

import click

from .. import codec, container, frames
from .common import EXIT_HELP, say
from .options import (
    io_options,
    jobs_options,
    jobs_or_cores,
    memlimit_option,
    parse_frame_size,
    replay_option,
    save_option,
    scheduler_of,
    train_options,
)
from .policy import each_input
from .progress import compile_note, progress_bar
from .start import check_mamba, check_save, load_start, prior_and_settings, write_model


@click.command(epilog=EXIT_HELP)
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
@jobs_options
@save_option
@replay_option
@memlimit_option
def compress(files, output, to_stdout, force, keep, remove, suffix, no_name, quiet, verbose,
             preset, seed, prior, model_path, resume_path, save_model, replay_chunk, memlimit,
             frame_size, jobs, scheduler, scheduler_timeout, **opts):  # fmt: skip
    """Compress FILES (- or none: stdin) to FILE.mz. The input's name and modification time
    are stored (see -n). Inputs that already end in .mz are skipped with a note unless -f
    or -o names the output."""
    start, resume = load_start(model_path, resume_path, quiet, memlimit)
    scheduler = scheduler_of(scheduler, scheduler_timeout)
    prior_model, settings = prior_and_settings(preset, seed, prior, opts, start, resume,
                                                memlimit)  # fmt: skip
    check_save(save_model, files, force, output=output)
    check_mamba(save_model, settings)
    if save_model is not None and frame_size:
        raise click.UsageError(
            "--save-model saves the model the input ends in, and each frame ends in its own: "
            "give --frame-size 0 (the default with --save-model)"
        )
    if frame_size is None:
        frame_size = 0 if save_model is not None else frames.DEFAULT_FRAME

    def run(src, dst, job):
        compile_note(settings, quiet)
        name = mtime = None
        if not job.stdin and not no_name:
            name, mtime = _storable_name(os.path.basename(job.path)), int(job.src_stat.st_mtime)
        with progress_bar(job.size, job.name, quiet, verbose) as progress:
            stats = codec.compress_stream(src, dst, settings, progress=progress, model=start,
                                          prior=prior_model, resume=resume,
                                          replay_chunk=replay_chunk, name=name, mtime=mtime,
                                          size=job.size, memlimit=memlimit, stored_blocks=True,
                                          frame_size=frame_size, jobs=jobs_or_cores(jobs),
                                          scheduler=scheduler)  # fmt: skip
        return write_model(save_model, stats, force)

    def after(job, stats, target):
        # Larger because the model coded worse than 8 bits/byte, not because of the header's
        # few hundred bytes (a diverging --lr, bad weights, or incompressible data).
        # NaN bits (non-finite weights) count as worse.
        n = stats.original_bytes
        if not quiet and n and stats.compressed_bytes > n and not stats.ideal_bits <= 8 * n:
            say(f"warning: {job.name}: {stats.compressed_bytes} bytes coded, more than the "
                 f"input's {n}: the model needed {stats.ideal_bits / n:.3f} bits/byte")  # fmt: skip

    def skip(path):
        if path.endswith(suffix):
            return f"{path}: already ends in {suffix}; unchanged (use -f to compress it anyway)"
        return None

    each_input(files, output, to_stdout, force, remove, quiet, verbose, run,
          name_output=lambda path: path + suffix, binary_out=True, skip=skip,
          after=after)  # fmt: skip


def _storable_name(name):
    """``name`` if a header may hold it (``container.valid_name``), else None: not stored."""
    return name if container.valid_name(name) else None
