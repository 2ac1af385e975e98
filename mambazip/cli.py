"""mambazip command line: parses, calls the library, reports. Messages go to stderr.

Exit codes: 0 success, 1 error in data or files, 2 usage error, 128 + the signal's number
when a signal stops the run (130 Ctrl-C, 143 SIGTERM, 129 SIGHUP). The entry points (and
the signal handlers, installed before this module is imported) are in ``entry.py``.
"""

import contextlib
import dataclasses
import json
import os
import shlex
import signal
import stat
import sys
import tempfile
import time

import click
import numpy as np
from tqdm import tqdm

from . import checkpoint, codec, container, entry, frames, limits, priors, report, workers
from .config import MIX_MODES, OPTIMIZERS, SCOPE_GROUPS, SCOPES, preset_names, resolve_settings
from .errors import ConfigError, MambazipError
from .files import atomic_output, same_file

SUFFIX = ".mz"
PROGRESS_MIN_BYTES = 1 << 16
PROGRESS_LINE_SECONDS = 5.0  # -v off a terminal: one progress line this often
KB = 1000  # every size and speed the command line prints is in units of 1000 bytes

EXIT_HELP = """\b
Exit codes: 0 success, 1 error in data or files (one line on stderr, no output left
behind), 2 usage error, 128 + signal when stopped by one (130 Ctrl-C, 143 SIGTERM,
129 SIGHUP; the temporary output is removed)."""

SHORT_USAGE = (
    "usage: mambazip compress|decompress|info|score|convert|train [OPTIONS] [FILES]... "
    "(mambazip -d FILE decompresses; mambazip --help for more)"
)

GROUP_HELP = """Lossless compression by a Mamba-1 model that learns the file while coding it.

\b
gzip habits: mambazip -d FILE is mambazip decompress FILE, -z compress, -t decompress -t,
-l info (also bundled: -dc FILE); unmz is mambazip decompress, mzcat is decompress -c."""


def _say(message):
    click.echo(f"mambazip: {message}", err=True)


def _scope(ctx, param, value):
    if value is None:
        return None
    names = tuple(s.strip() for s in value.split(",") if s.strip())
    bad = [s for s in names if s not in SCOPES]
    if bad or not names:
        raise click.BadParameter(f"must be a comma list of {', '.join(SCOPES)}")
    return names


def _lr_scale(ctx, param, value):
    """--lr-scale head=2,embed=0.5 -> {"head": 2.0, "embed": 0.5}."""
    if value is None:
        return None
    out = {}
    for item in value.split(","):
        group, _, number = item.strip().partition("=")
        try:
            out[group] = float(number)
        except ValueError:
            raise click.BadParameter(f"{item.strip()!r} is not GROUP=MULTIPLIER") from None
        if group not in SCOPE_GROUPS:
            raise click.BadParameter(f"{group!r} is not one of {', '.join(SCOPE_GROUPS)}")
    return out


def _memlimit(ctx, param, value):
    if value is None:
        return None
    try:
        return limits.parse_size(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


_memlimit_option = click.option(
    "--memlimit", metavar="SIZE", callback=_memlimit,
    help=f"Refuse work whose model, tables or starting checkpoint need more memory than "
         f"SIZE: bytes, or 512MiB, 2G (powers of 1024, as in xz) "
         f"[default: {limits.format_bytes(limits.DEFAULT_MEMLIMIT)}].",
)  # fmt: skip


def _frame_size(ctx, param, value):
    if value is None:
        return None
    if value.strip() == "0":
        return 0
    try:
        size = limits.parse_size(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc).replace("a memory limit", "a frame")) from None
    if size > container.MAX_FRAME:
        raise click.BadParameter(f"at most {container.MAX_FRAME >> 30} GiB")
    return size


def _byte_range(ctx, param, value):
    if value is None:
        return None
    first, sep, last = value.partition(":")
    try:
        start = int(first) if first else 0
        end = int(last) if last else None
    except ValueError:
        start = end = -1
    if not sep or start < 0 or (end is not None and end < start):
        raise click.BadParameter(
            f"{value!r} is not START:END (offsets in the original, END excluded; either may "
            f"be left out: 100:, :4096)"
        )
    return start, end


def _stack(*options):
    """One decorator for several click options, shown in the order given."""

    def decorate(f):
        for option in reversed(options):
            f = option(f)
        return f

    return decorate


_jobs_options = _stack(
    click.option("-T", "--jobs", type=click.IntRange(min=0),
                 help=f"Code this many frames at once, in worker processes (0: one per "
                      f"core, here {workers.default_jobs()}; 1: in this process). The "
                      f"output is the same for any number [default: 0]."),
    click.option("--scheduler", metavar="ADDRESS",
                 help="Code the frames on the Dask cluster of this scheduler (e.g. "
                      "tcp://10.0.0.5:8786); its workers need the same mambazip installed."),
    click.option("--scheduler-timeout", metavar="SECONDS",
                 type=click.FloatRange(min=0, min_open=True),
                 default=workers.DEFAULT_TIMEOUT, show_default=True,
                 help="With --scheduler: give up (exit 1) after this long without "
                      "progress (no frame finished, no worker coding one heard from), e.g. "
                      "when all its workers are gone."),
)  # fmt: skip


def _jobs(jobs):
    return jobs or workers.default_jobs()


def _scheduler(address, timeout):
    return None if address is None else workers.Scheduler(address, timeout)


def _suffix(ctx, param, value):
    if not value or "/" in value or value in (".", ".."):
        raise click.BadParameter(f"{value!r} is not a file name suffix")
    return value


def _io_options(force_help, no_name_help):
    def decorate(f):
        options = [
            click.argument("files", nargs=-1, type=click.Path(allow_dash=True)),
            click.option("-o", "--output", type=click.Path(dir_okay=False, allow_dash=True),
                         help="Write to this file (one input only); - for stdout."),
            click.option("-c", "--stdout", "to_stdout", is_flag=True, help="Write to stdout."),
            click.option("-f", "--force", is_flag=True, help=force_help),
            click.option("-k", "--keep", is_flag=True,
                         help="Keep input files (the default; see --rm)."),
            click.option("--rm", "remove", is_flag=True,
                         help="Delete each input after its output is written."),
            click.option("-S", "--suffix", default=SUFFIX, show_default=True, callback=_suffix,
                         help="Suffix of compressed files."),
            click.option("-n", "--no-name", is_flag=True, help=no_name_help),
            click.option("-q", "--quiet", is_flag=True,
                         help="No progress, no notes, no warnings."),
            click.option("-v", "--verbose", is_flag=True,
                         help="A summary line per file; progress also when stderr is not "
                              "a terminal (a line every few seconds)."),
        ]  # fmt: skip
        for option in reversed(options):
            f = option(f)
        return f

    return decorate


@click.group(context_settings={"help_option_names": ["-h", "--help"]}, epilog=EXIT_HELP,
             help=GROUP_HELP)  # fmt: skip
@click.version_option(None, "-V", "--version", package_name="mambazip")
def cli():
    pass


MODEL_KEYS = ("d_model", "n_layer", "d_inner", "d_state", "d_conv", "dt_rank")


_start_options = _stack(
    click.option("--model", "model_path", type=click.Path(),
                 help="Start from this model's weights with fresh optimizer state: a "
                      "checkpoint of ours, a Hugging Face or mamba_ssm folder or "
                      ".safetensors file."),
    click.option("--resume", "resume_path", type=click.Path(),
                 help="Start from this checkpoint's weights, Adam moments and step (and "
                      "the training settings saved with it)."),
)  # fmt: skip


# The training recipe beyond lr and bptt (config.TrainConfig); compress and train share them.
_recipe_options = _stack(
    click.option("--beta1", type=float, help="Adam's first-moment decay (0: no momentum)."),
    click.option("--beta2", type=float, help="Adam's second-moment decay."),
    click.option("--beta2-warmup/--no-beta2-warmup", default=None,
                 help="Adam's second moment is the plain mean of g^2 until it is as "
                      "long as beta2's memory, 1 / (1 - beta2) steps."),
    click.option("--lr-scale", callback=_lr_scale,
                 help="Learning-rate multipliers per group, e.g. head=2,embed=0.5 "
                      f"(groups: {', '.join(SCOPE_GROUPS)})."),
    click.option("--horizon", type=int,
                 help="Each update (every --bptt bytes) carries the gradient of its new "
                      "bytes back through this many, a multiple of --bptt (0: --bptt)."),
    click.option("--curriculum", type=int,
                 help="Start the horizon at --bptt and grow it by --bptt every this "
                      "many bytes (0: the full horizon from the start)."),
    click.option("--iters", type=int, help="Optimizer steps per update."),
    click.option("--replay-every", type=int,
                 help="Every this many bytes, train again on the last --replay-window "
                      "bytes (0: never)."),
    click.option("--replay-window", type=int, help="Bytes of history a replay learns."),
    click.option("--replay-passes", type=int, help="Passes over the window per replay."),
)  # fmt: skip


def _train_options(f):
    options = [
        click.option("--preset", default="default", show_default=True,
                     help=f"Model and training preset from models/ ({', '.join(preset_names())})."),
        click.option("--mix", type=click.Choice(MIX_MODES),
                     help="Predictor: none = the Mamba alone, cm = the context models alone, "
                          "full = both mixed (default: the preset's)."),
        click.option("--optimizer", type=click.Choice(OPTIMIZERS), help="Online optimizer."),
        click.option("--lr", type=float, help="Learning rate."),
        click.option("--scope", callback=_scope,
                     help=f"What to train: comma list of {', '.join(SCOPES)}."),
        click.option("--clip", type=float, help="Element-wise gradient clip (0: none)."),
        click.option("--bptt", type=int,
                     help="Truncated BPTT: one update per this many bytes (1: every byte)."),
        click.option("--warmup", type=int, help="Learning-rate warm-up, in bytes."),
        click.option("--decay", type=int,
                     help="Decay lr by sqrt(decay / t) after t > decay bytes."),
        _recipe_options,
        click.option("--seed", type=int, help="Seed of the initial weights."),
        click.option("--prior", type=click.Choice(("preset", "none")), default="preset",
                     show_default=True,
                     help="Start the Mamba from the preset's pretrained prior (models/priors/, "
                          "when the preset has one and its shape is kept), or from the "
                          "seeded random init; --model and --resume override it."),
        click.option("--d-model", type=int, help="Residual width."),
        click.option("--n-layer", type=int, help="Number of Mamba blocks."),
        click.option("--d-inner", type=int, help="Mixer width (default 2 d_model)."),
        click.option("--d-state", type=int, help="SSM state size."),
        click.option("--d-conv", type=int, help="Convolution width."),
        click.option("--dt-rank", type=int, help="Rank of the time-step projection."),
        _start_options,
    ]  # fmt: skip
    for option in reversed(options):
        f = option(f)
    return f


_save_option = click.option(
    "--save-model",
    type=click.Path(dir_okay=False),
    help="Save the model the file ends in, with its optimizer state, to this checkpoint.",
)


def _load_start(model_path, resume_path, quiet, memlimit=None):
    """(checkpoint or None, resume) from --model / --resume."""
    if model_path and resume_path:
        raise click.UsageError("--model and --resume exclude each other")
    path = model_path or resume_path
    if path is None:
        return None, False
    try:
        start = checkpoint.load(path, memlimit=memlimit)
    except MambazipError as exc:
        raise click.ClickException(str(exc)) from None
    notices = list(start.notices)
    if resume_path and start.moments is None:
        notices.append(f"{path}: no Adam moments in this checkpoint; they start from zero")
    if not quiet:
        for notice in notices:
            _say(f"note: {notice}")
    return start, bool(resume_path)


def _prior_and_settings(preset, seed, prior, opts, start, resume, memlimit):
    """The preset's prior (None without one, with --prior none, or when --model or --resume
    gave the start) and the settings (``_settings``)."""
    settings = _settings(preset, seed, opts, start, resume)
    if start is not None or prior != "preset":
        return None, settings
    try:
        return priors.for_settings(preset, settings, memlimit), settings
    except MambazipError as exc:
        raise click.ClickException(str(exc)) from None


def _settings(preset, seed, opts, start, resume):
    """Settings from the preset and options, or for a starting checkpoint, whose shape wins
    over the preset and must not be contradicted by explicit shape options."""
    shape = {k: opts.pop(k) for k in MODEL_KEYS}
    mix = opts.pop("mix")
    try:
        if start is None:
            return resolve_settings(preset, model=shape, train=opts, seed=seed, mix=mix)
        for key, value in shape.items():
            have = getattr(start.config, key)
            if value is not None and value != have:
                flag = "--" + key.replace("_", "-")
                raise click.UsageError(f"{flag} {value} contradicts the model's {key} {have}")
        if mix == "cm":
            raise click.UsageError("--mix cm leaves out the Mamba that --model/--resume start")
        return start.settings_for(resume, preset, train=opts, seed=seed, mix=mix)
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None


def _check_save(path, files, force, option="--save-model", output=None):
    """Refuse before the work rather than after it: an existing file without -f, and, with
    or without -f, a path that is one of the inputs or the output."""
    if path is None:
        return
    if len(files) > 1:
        raise click.UsageError(f"{option} takes one input file")
    for other in files:
        if other != "-" and (other == path or same_file(other, path)):
            raise click.ClickException(f"{path}: {option} names the input file; nothing written")
    if output not in (None, "-") and (output == path or same_file(output, path)):
        raise click.UsageError(f"{option} and -o name the same file")
    if os.path.lexists(path) and not force:
        raise click.ClickException(f"{path} already exists; use -f to overwrite")


_replay_option = click.option(
    "--replay-chunk",
    type=click.IntRange(min=1),
    help="Keep truncated-BPTT activations for this many bytes and replay the rest of a "
    "segment (less memory, more time; the output is the same).",
)


def _save(save_model, stats, force):
    if save_model is not None:
        if stats.learner is None:
            raise MambazipError(
                "no model to save: this stream was coded without the Mamba (--mix cm, or "
                "an empty input); nothing written"
            )
        checkpoint.save(save_model, stats.learner, force)
    return stats


def _check_mamba(save_model, settings):
    if save_model is not None and settings.mix is not None and not settings.mix.mamba:
        raise click.UsageError("--save-model saves the Mamba, which --mix cm leaves out")


@cli.command(epilog=EXIT_HELP)
@_io_options(
    "Overwrite existing outputs; also compress inputs that already end in the suffix, "
    "follow symlinked inputs, read devices and FIFOs, and write compressed data to a "
    "terminal.",
    "Do not store the input's name and mtime in the header.",
)
@_train_options
@click.option(
    "--frame-size",
    metavar="SIZE",
    callback=_frame_size,
    help=f"Cut the input into frames of SIZE bytes (or 1MiB, 4M: powers of 1024), "
    f"each coded from the same start by a fresh model, so that frames code "
    f"on every core and a slice decodes alone (decompress --range); 0: one "
    f"frame [default: {frames.DEFAULT_FRAME >> 20}MiB; with --save-model, 0].",
)
@_jobs_options
@_save_option
@_replay_option
@_memlimit_option
def compress(files, output, to_stdout, force, keep, remove, suffix, no_name, quiet, verbose,
             preset, seed, prior, model_path, resume_path, save_model, replay_chunk, memlimit,
             frame_size, jobs, scheduler, scheduler_timeout, **opts):  # fmt: skip
    """Compress FILES (- or none: stdin) to FILE.mz. The input's name and modification time
    are stored (see -n). Inputs that already end in .mz are skipped with a note unless -f
    or -o names the output."""
    start, resume = _load_start(model_path, resume_path, quiet, memlimit)
    scheduler = _scheduler(scheduler, scheduler_timeout)
    prior_model, settings = _prior_and_settings(preset, seed, prior, opts, start, resume,
                                                memlimit)  # fmt: skip
    _check_save(save_model, files, force, output=output)
    _check_mamba(save_model, settings)
    if save_model is not None and frame_size:
        raise click.UsageError(
            "--save-model saves the model the input ends in, and each frame ends in its own: "
            "give --frame-size 0 (the default with --save-model)"
        )
    if frame_size is None:
        frame_size = 0 if save_model is not None else frames.DEFAULT_FRAME

    def run(src, dst, job):
        _compile_note(settings, quiet)
        name = mtime = None
        if not job.stdin and not no_name:
            name, mtime = _storable_name(os.path.basename(job.path)), int(job.src_stat.st_mtime)
        with _progress(job.size, job.name, quiet, verbose) as progress:
            stats = codec.compress_stream(src, dst, settings, progress=progress, model=start,
                                          prior=prior_model,
                                          resume=resume, replay_chunk=replay_chunk, name=name,
                                          mtime=mtime, size=job.size, memlimit=memlimit,
                                          stored_blocks=True, frame_size=frame_size,
                                          jobs=_jobs(jobs), scheduler=scheduler)  # fmt: skip
        return _save(save_model, stats, force)

    def after(job, stats, target):
        # Larger because the model coded worse than 8 bits/byte, not because of the header's
        # few hundred bytes (a diverging --lr, bad weights, or incompressible data).
        # NaN bits (non-finite weights) count as worse.
        n = stats.original_bytes
        if not quiet and n and stats.compressed_bytes > n and not stats.ideal_bits <= 8 * n:
            _say(f"warning: {job.name}: {stats.compressed_bytes} bytes coded, more than the "
                 f"input's {n}: the model needed {stats.ideal_bits / n:.3f} bits/byte")  # fmt: skip

    def skip(path):
        if path.endswith(suffix):
            return f"{path}: already ends in {suffix}; unchanged (use -f to compress it anyway)"
        return None

    _each(files, output, to_stdout, force, remove, quiet, verbose, run,
          name_output=lambda path: path + suffix, binary_out=True, skip=skip,
          after=after)  # fmt: skip


@cli.command(epilog=EXIT_HELP)
@_io_options(
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
    callback=_byte_range,
    help="Write only bytes START to END-1 of the original (to stdout unless -o "
    "names a file). A framed file decodes only the frames that hold them.",
)
@_jobs_options
@_start_options
@_save_option
@_replay_option
@_memlimit_option
def decompress(files, output, to_stdout, force, keep, remove, suffix, no_name, quiet, verbose,
               restore_name, test, byte_range, jobs, scheduler, scheduler_timeout, model_path,
               resume_path, save_model, replay_chunk, memlimit):  # fmt: skip
    """Decompress FILES.mz (- or none: stdin) and verify their checksums; the output gets
    the modification time stored in the file (see -n). Concatenated .mz files decode as one
    output. A file compressed from a starting model needs the same model, given with the
    same option."""
    start, resume = _load_start(model_path, resume_path, quiet, memlimit)
    scheduler = _scheduler(scheduler, scheduler_timeout)
    _check_save(save_model, files, force, output=output)
    if byte_range is not None:
        if remove:
            raise click.UsageError("--range writes part of the original: --rm would then "
                                   "delete the rest")  # fmt: skip
        if len(files) > 1:
            raise click.UsageError("--range takes one input file")
        if save_model is not None:
            raise click.UsageError("--range and --save-model exclude each other")
        to_stdout = to_stdout or output is None
    # The model a file ends in is that of its one frame, decoded in this process.
    jobs = 1 if save_model is not None else _jobs(jobs)

    def run(src, dst, job):
        with _progress(None, job.name, quiet, verbose) as progress:

            def on_header(header):
                if header["settings"] is not None:
                    _compile_note(header["settings"], quiet)
                progress.set_total(header["size"])

            if byte_range is not None:
                if not _seekable(src):
                    raise MambazipError("--range needs a file it can seek in, not a pipe")
                stats = codec.decompress_range(src, dst, *byte_range, progress=progress,
                                               model=start, resume=resume,
                                               replay_chunk=replay_chunk, memlimit=memlimit,
                                               jobs=jobs, scheduler=scheduler)  # fmt: skip
            else:
                stats = codec.decompress_stream(src, dst, progress=progress, model=start,
                                                resume=resume, replay_chunk=replay_chunk,
                                                memlimit=memlimit, on_header=on_header,
                                                jobs=jobs, scheduler=scheduler)  # fmt: skip
        if save_model is not None and stats.frames > 1:
            raise MambazipError(
                f"--save-model: this file has {stats.frames} frames, each ending in its own "
                f"model (compress with --frame-size 0 to save one); nothing written"
            )
        return _save(save_model, stats, force)

    def after(job, stats, target):
        if byte_range is not None:
            return  # a part of the original is not the file the stored mtime belongs to
        if not no_name and stats.mtime is not None and target not in (None, "-"):
            with contextlib.suppress(OSError, OverflowError, ValueError):
                if os.path.isfile(target):
                    os.utime(target, (time.time(), stats.mtime))

    def name_output(path):
        if not path.endswith(suffix) or path == suffix:
            raise MambazipError(f"unknown suffix, expected {suffix}; use -o to name the output")
        return path[: -len(suffix)]

    rename = _stored_name_output(name_output, quiet) if restore_name and not no_name else None
    if test:
        _each(files, None, False, force, False, quiet, verbose, run, name_output, test=True,
              binary_in=True)  # fmt: skip
    else:
        _each(files, output, to_stdout, force, remove, quiet, verbose, run, name_output,
              binary_in=True, after=after, rename=rename)  # fmt: skip


def _seekable(f):
    try:
        return f.seekable()
    except (AttributeError, OSError, ValueError):
        return False


def _storable_name(name):
    """``name`` if a header may hold it (``container.valid_name``), else None: not stored."""
    return name if container.valid_name(name) else None


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
                _say(f"note: {path}: stored name {stored!r} is not usable; using the file's")
            return name_output(path)
        return os.path.join(os.path.dirname(path), base)

    return rename


@cli.command(epilog=EXIT_HELP)
@click.argument("files", nargs=-1, required=True,
                type=click.Path(dir_okay=False, allow_dash=True))  # fmt: skip
@_train_options
@click.option("--json", "as_json", is_flag=True,
              help="Print one JSON object per file: bytes, ideal_bits, bits_per_byte, "
                   "coded_bytes, coded_bits_per_byte, seconds, bytes_per_second.")  # fmt: skip
@click.option(
    "--per-byte",
    type=click.Path(dir_okay=False),
    help="Write each byte's -log2 p as a float64 .npy (one input only).",
)
@click.option("--html", "html_path", type=click.Path(dir_okay=False),
              help="Write a page that colours each byte by its code length and shows which "
                   "part of the predictor the mixer trusted most, region by region (one "
                   "input only).")  # fmt: skip
@_save_option
@_memlimit_option
@click.option("-f", "--force", is_flag=True, help="Overwrite existing outputs.")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar, no notes.")
def score(files, preset, seed, prior, model_path, resume_path, as_json, per_byte, html_path,
          save_model, memlimit, force, quiet, **opts):  # fmt: skip
    """Run the online loop of compress over FILES and report how well the model predicts
    them, writing no compressed file. bits_per_byte is the ideal code length, the sum of
    -log2 p over every byte (the first predicted after the priming byte 0); coded_bytes is
    what compress would write, header included. --optimizer none: inference only."""
    start, resume = _load_start(model_path, resume_path, quiet, memlimit)
    prior_model, settings = _prior_and_settings(preset, seed, prior, opts, start, resume,
                                                memlimit)  # fmt: skip
    _check_save(save_model, files, force)
    _check_mamba(save_model, settings)
    _check_save(per_byte, files, force, "--per-byte")
    _check_save(html_path, files, force, "--html")
    outputs = [p for p in (save_model, per_byte, html_path) if p is not None]
    if len({os.path.abspath(p) for p in outputs}) < len(outputs):
        raise click.UsageError("--per-byte, --html and --save-model must name different files")
    failed = False
    for path in files:
        bits, trust, head = [], [] if html_path else None, []
        try:
            entry.check()
            stats = _score_one(path, settings, start, prior_model, resume, quiet, bits, memlimit,
                               trust, head)  # fmt: skip
            if per_byte is not None:
                with atomic_output(per_byte, force) as f:
                    np.save(f, np.concatenate([np.zeros(0), *bits]))
            if html_path is not None:
                _write_html(html_path, path, b"".join(head), bits, trust, stats, force)
            _save(save_model, stats, force)
        except (MambazipError, OSError, MemoryError) as exc:
            _say(_describe(path, exc))
            failed = True
            continue
        _report_score(path, stats, as_json)
    if failed:
        sys.exit(1)


def _score_one(path, settings, start, prior, resume, quiet, bits, memlimit, trust=None,
               head=None):  # fmt: skip
    """compress_stream into nothing; ``head`` receives the first report.SHOWN bytes read."""
    name = "stdin" if path == "-" else os.path.basename(path)
    with contextlib.ExitStack() as stack:
        src = sys.stdin.buffer if path == "-" else stack.enter_context(open(path, "rb"))
        size = None if path == "-" else os.fstat(src.fileno()).st_size
        _compile_note(settings, quiet)
        with _progress(size, name, quiet) as progress:
            return codec.compress_stream(_Head(src, head, report.SHOWN), _Discard(), settings,
                                         progress=progress, model=start, prior=prior,
                                         resume=resume, per_byte=bits, memlimit=memlimit,
                                         trust=trust,
                                         stored_blocks=True)  # fmt: skip


class _Head:
    """Reads through ``f`` and keeps the first ``limit`` bytes in ``parts``."""

    def __init__(self, f, parts, limit):
        self.f, self.parts, self.left = f, parts, limit

    def read(self, n):
        data = self.f.read(n)
        if self.left > 0 and data:
            self.parts.append(data[: self.left])
            self.left -= len(self.parts[-1])
        return data


def _write_html(out, path, head, bits, trust, stats, force):
    bits = np.concatenate([np.zeros(0), *bits])
    n = bits.shape[0]
    names = ("mamba",)
    shares = np.ones((n, 1), np.float32)  # the Mamba alone: it has all the trust
    if trust:
        shares = np.concatenate(trust)
        names = stats.part_names
    page = report.render(head, bits, shares, names, f"mambazip score: {os.path.basename(path)}")
    with atomic_output(out, force) as f:
        f.write(page.encode())


def _report_score(path, stats, as_json):
    n = stats.original_bytes
    report = {
        "file": path,
        "bytes": n,
        "ideal_bits": stats.ideal_bits,
        "bits_per_byte": stats.ideal_bits / n if n else 0.0,
        "coded_bytes": stats.compressed_bytes,
        "coded_bits_per_byte": 8.0 * stats.compressed_bytes / n if n else 0.0,
        "seconds": stats.seconds,
        "bytes_per_second": n / max(stats.seconds, 1e-9),
    }
    if as_json:
        click.echo(json.dumps(report))
        return
    click.echo(
        f"{path}: {n} bytes, {report['bits_per_byte']:.4f} bits/byte ideal "
        f"({stats.ideal_bits:.1f} bits), {stats.compressed_bytes} bytes coded "
        f"({report['coded_bits_per_byte']:.4f} bits/byte), {stats.seconds:.2f} s, "
        f"{report['bytes_per_second'] / KB:.2f} KB/s"
    )


@cli.command(epilog=EXIT_HELP)
@click.argument("src", type=click.Path())
@click.argument("dst", type=click.Path(dir_okay=False))
@click.option("-f", "--force", is_flag=True, help="Overwrite DST if it exists.")
@_memlimit_option
@click.option("-q", "--quiet", is_flag=True, help="No notes.")
@click.option("-v", "--verbose", is_flag=True, help="Print what was converted.")
def convert(src, dst, force, memlimit, quiet, verbose):
    """Convert a model to a mambazip checkpoint: a Hugging Face or mamba_ssm folder or
    .safetensors file (F32/F16/BF16, sharded or not), or a checkpoint of ours."""
    if src == dst or same_file(src, dst):
        raise click.ClickException(f"{dst}: DST is SRC; nothing written")
    start, _ = _load_start(src, None, quiet, memlimit)
    if start.settings is None:
        # Models from elsewhere carry no training settings: record the default preset's.
        start.settings = start.settings_for(resume=False)
    try:
        checkpoint.write(dst, start, force)
    except (MambazipError, OSError, MemoryError) as exc:
        raise click.ClickException(_describe(dst, exc)) from None
    if verbose:
        moments = "with Adam moments" if start.moments is not None else "weights only"
        _say(f"{dst}: {_fields(dataclasses.asdict(start.config))}, {moments}")


@cli.command(epilog=EXIT_HELP)
@click.argument("files", nargs=-1, type=click.Path(dir_okay=False, allow_dash=True))
@click.option("-t", "--test", is_flag=True,
              help="Also decompress each file, writing nothing: OK or what is wrong.")  # fmt: skip
@_start_options
@_memlimit_option
@click.option("-q", "--quiet", is_flag=True, help="No progress, no notes.")
def info(files, test, model_path, resume_path, memlimit, quiet):
    """Show the header of .mz FILES (- or none: stdin): sizes, bits/byte, stored name and
    mtime, model and training settings. --model / --resume: the starting model that --test
    needs for a file compressed from one."""
    start, resume = _load_start(model_path, resume_path, quiet, memlimit)
    failed = False
    for path in files or ("-",):
        try:
            entry.check()
            failed |= not _info_one(path, test, start, resume, quiet, memlimit)
        except BrokenPipeError:  # the reader went away (| head): not this file's fault
            raise
        except (MambazipError, OSError, MemoryError) as exc:
            _say(_describe(path, exc))
            failed = True
    sys.exit(1 if failed else 0)


def _info_one(path, test, start, resume, quiet, memlimit):
    """Print the info of one file; False if its --test failed."""
    name = "stdin" if path == "-" else path
    with contextlib.ExitStack() as stack:
        if path == "-":
            _refuse_terminal_stdin(False, "; give a file or a pipe")
            f = stack.enter_context(_rewindable(sys.stdin.buffer))
        else:
            f = stack.enter_context(open(path, "rb"))
        header = container.read_header(f)
        length, crc, streams, index = _scan_to_end(f, header)
        _print_header(name, header, length, crc, f.tell(), streams)
        if index is not None:
            _print_frames(header, index)
        if not test:
            return True
        f.seek(0)
        try:
            if header["settings"] is not None:
                _compile_note(header["settings"], quiet)
            with _progress(length, os.path.basename(name), quiet) as progress:
                codec.decompress_stream(f, _Discard(), progress=progress, model=start,
                                        resume=resume, memlimit=memlimit)  # fmt: skip
        except MambazipError as exc:
            click.echo(f"  test             failed: {exc}")
            _say(_describe(name, exc))
            return False
        click.echo("  test             OK")
        return True


def _print_header(name, header, length, crc, size, streams):
    bpb = 8.0 * size / length if length else 0.0
    click.echo(f"{name}:")
    click.echo(f"  format version   {header['version']}")
    if streams > 1:
        click.echo(f"  streams          {streams} (decoded as one output; the first is shown)")
    click.echo(f"  original size    {length} bytes (crc32 {crc:08x})")
    click.echo(f"  compressed size  {size} bytes, {bpb:.4f} bits/byte")
    if header.get("name") is not None:
        click.echo(f"  stored name      {header['name']}")
    if header.get("mtime") is not None:
        when = time.strftime("%Y-%m-%d %H:%M:%S %z", time.localtime(header["mtime"]))
        click.echo(f"  stored mtime     {header['mtime']} ({when})")
    if header["settings"] is None:
        click.echo("  model            none (an empty stream)")
        return
    settings = header["settings"].to_dict()
    click.echo(f"  block size       {header['block_size']}")
    click.echo(f"  model            {_fields(settings['model'])}")
    # Every field, bptt included (the header of a format-1 file leaves it out: it is 1); the
    # recipe knobs only where they are set.
    train = header["settings"].train.to_dict()
    click.echo(f"  training         {_fields(train)}")
    if settings.get("mix") is not None:
        mix = settings["mix"]
        click.echo(f"  mixing           {_fields(mix) if isinstance(mix, dict) else mix}")
    click.echo(f"  seed             {settings['seed']}")
    if header["model_sha256"]:
        click.echo(f"  starting model   sha256 {header['model_sha256']} "
                   f"({_starting_model_kind(header)})")  # fmt: skip


def _starting_model_kind(header):
    if header["model_resume"]:
        return "--resume"
    if priors.shipped(header["model_sha256"]):
        return "a prior shipped with mambazip"
    return "--model, or a prior this installation does not ship"


def _print_frames(header, index):
    size = header["frame_size"]
    click.echo(f"  frames           {len(index.frames)} of "
               f"{f'{size} bytes' if size else 'any size'} (seek index at the end)")  # fmt: skip
    for number, fr in enumerate(index.frames, 1):
        bpb = 8.0 * fr.packed_size / fr.size
        click.echo(f"    frame {number:<6} original {fr.offset}-{fr.offset + fr.size - 1}, "
                   f"at {fr.packed_offset}, {fr.packed_size} bytes, {bpb:.4f} bits/byte, "
                   f"crc32 {fr.crc:08x}")  # fmt: skip


@contextlib.contextmanager
def _rewindable(stream):
    """A seekable copy of a pipe (in memory up to 16 MB, then in a temporary file)."""
    with tempfile.SpooledTemporaryFile(max_size=16 << 20) as f:
        while chunk := stream.read(1 << 20):
            f.write(chunk)
        f.seek(0)
        yield f


def _fields(d):
    def show(v):
        return ",".join(v) if isinstance(v, (list, tuple)) else v

    return " ".join(f"{k}={show(v)}" for k, v in d.items())


def _scan_to_end(f, header):
    """(total original length, CRC32 of the first stream, number of streams, the first
    stream's seek index or None) of the seekable ``f`` positioned after its first header;
    leaves ``f`` at its end."""
    total, first_crc, streams, first_index = 0, None, 0, None
    while True:
        if header["version"] >= 4:
            index = container.scan_frames(f, header)
            length, crc = index.length, index.crc
            first_index = index if not streams else first_index
        else:
            for n_bytes, payload in container.read_blocks(f, header["block_size"],
                                                          header["version"]):  # fmt: skip
                if n_bytes == "end":
                    length, crc = payload
        total += length
        first_crc = crc if first_crc is None else first_crc
        streams += 1
        here = f.tell()
        if not f.read(1):
            return total, first_crc, streams, first_index
        f.seek(here)
        header = container.read_header(f, following=True)


# ------------------------------------------------------------------------- progress


class _Progress:
    """The progress reporter handed to the codec: ``self(n_bytes, bits)`` after each chunk.

    A tqdm bar on stderr when it is a terminal and the input is worth waiting for (or of
    unknown size); with ``verbose`` off a terminal, a plain line every
    PROGRESS_LINE_SECONDS. Sizes and speeds in units of 1000 bytes (kB, KB/s), as
    everywhere else. Either way it is where a signal deferred out of Numba is raised."""

    def __init__(self, total, name, quiet, verbose=False, clock=time.monotonic):
        self.total, self.name, self.clock = total, name, clock
        self.done, self.bits = 0, 0.0
        self.bar = None
        self.lines = False
        if quiet:
            return
        if sys.stderr.isatty():
            if total is None or total >= PROGRESS_MIN_BYTES:
                # Updates come once per 4 KB chunk, a few a second: draw every one of them.
                self.bar = tqdm(total=total, desc=name, unit="B", unit_scale=True,
                                unit_divisor=KB, file=sys.stderr, leave=False,
                                dynamic_ncols=True, mininterval=0)  # fmt: skip
        elif verbose:
            self.lines = True
            self.start = self.last = clock()

    def set_total(self, total):
        """The input's size, once known (the decoder learns it from the header)."""
        self.total = total
        if self.bar is not None and total is not None:
            self.bar.total = total
            self.bar.refresh()

    def __call__(self, n_bytes, bits=0.0):
        entry.check()
        self.done += n_bytes
        self.bits += bits
        if self.bar is not None:
            if self.bits:
                self.bar.set_postfix_str(f"{self.bits / self.done:.3f} bits/byte", refresh=False)
            self.bar.update(n_bytes)
        elif self.lines:
            now = self.clock()
            if now - self.last >= PROGRESS_LINE_SECONDS:
                self.last = now
                _say(self.line(now - self.start))

    def line(self, seconds):
        parts = [f"{self.name}: {_size(self.done)}"]
        if self.total:
            parts[0] += f" of {_size(self.total)} ({100 * self.done / self.total:.0f} %)"
        if self.bits:
            parts.append(f"{self.bits / self.done:.3f} bits/byte")
        parts.append(f"{self.done / KB / max(seconds, 1e-9):.2f} KB/s")
        return ", ".join(parts)

    def close(self):
        if self.bar is not None:
            self.bar.close()


def _size(n):
    if n < KB:
        return f"{n} B"
    if n < KB * KB:
        return f"{n / KB:.1f} kB"
    return f"{n / KB / KB:.2f} MB"


@contextlib.contextmanager
def _progress(total, name, quiet, verbose=False):
    progress = _Progress(total, name, quiet, verbose)
    try:
        yield progress
    finally:
        progress.close()


_compile_noted = []


def _compile_note(settings, quiet):
    """Say once per run that the kernels are compiling when Numba's cache for them is empty
    or stale (a first run, or a run after an upgrade): it takes about a minute."""
    if quiet or _compile_noted:
        return
    if not _kernels_cached(settings):
        _compile_noted.append(True)
        _say("note: compiling kernels (about a minute, once)")


def _kernels_cached(settings):
    """Whether Numba's cache holds the loop kernel these settings run, for this source.
    Reads Numba's cache index (the same check Numba makes before loading it); where that
    internal API is missing, says yes rather than print a wrong note."""
    try:
        from .kernels import segment, step
        from .predictor import loop

        kernels = []
        if settings.mix is None or settings.mix.mamba:
            kernels.append(segment.run_segments if settings.train.bptt > 1 else step.run_bytes)
        if settings.mix is not None:
            kernels.append(loop.run)
        return all(kernel._cache._cache_file._load_index() for kernel in kernels)
    except Exception:
        return True


# ------------------------------------------------------------------------- files


def _describe(path, exc):
    if isinstance(exc, MemoryError):
        # The machine (or a ulimit) has less memory than --memlimit allowed.
        detail = " ".join(str(exc).split()) or "an allocation failed"
        return f"{path}: out of memory ({detail}); lower --memlimit to refuse such files early"
    if isinstance(exc, OSError):
        return f"{exc.filename or path}: {exc.strerror or exc}"
    return f"{path}: {exc}"


class _Skip(Exception):  # noqa: N818 (not an error)
    """An input left alone on purpose: a note, not an error."""


@dataclasses.dataclass
class _Job:
    """One input: its path (- for stdin), the name shown, its stat and size when known."""

    path: str
    stdin: bool
    name: str
    src_stat: os.stat_result = None
    size: int = None


def _each(files, output, to_stdout, force, remove, quiet, verbose, run, name_output,
          test=False, binary_out=False, binary_in=False, skip=None, after=None,
          rename=None):  # fmt: skip
    files = files or ("-",)
    if output is not None and len(files) > 1:
        raise click.UsageError("-o/--output takes one input file")
    if output is not None and to_stdout:
        raise click.UsageError("-o and -c exclude each other")
    failed = False
    for path in files:
        try:
            entry.check()
            _one(path, output, to_stdout, force, remove, verbose, run, name_output, test,
                 binary_out, binary_in, skip, after, rename)  # fmt: skip
        except _Skip as note:
            if not quiet:
                _say(f"note: {note}")
        except BrokenPipeError:  # the reader of stdout went away (| head): stop quietly
            raise
        except (MambazipError, OSError, MemoryError) as exc:
            _say(_describe(path, exc))
            failed = True
    if failed:
        sys.exit(1)


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


def _refuse_terminal_stdin(force, hint="; use -f to force"):
    if not force and sys.stdin.isatty():
        raise MambazipError(f"compressed data not read from a terminal{hint}")


def _one(path, output, to_stdout, force, remove, verbose, run, name_output, test, binary_out,
         binary_in, skip, after, rename):  # fmt: skip
    stdin = path == "-"
    if not stdin:
        _check_input(path, force)
    derived = False
    if test:
        target = None
    elif to_stdout or output == "-" or (stdin and output is None):
        target = "-"
    else:
        if output is None and skip is not None and not force and (note := skip(path)):
            raise _Skip(note)
        derived = output is None
        target = output or (None if rename else name_output(path))
    if target == "-" and binary_out and sys.stdout.isatty() and not force:
        raise MambazipError("compressed data not written to a terminal; use -f to force")
    if stdin and binary_in:
        _refuse_terminal_stdin(force)
    job = _Job(path, stdin, "stdin" if stdin else os.path.basename(path))
    with contextlib.ExitStack() as stack:
        src = sys.stdin.buffer if stdin else stack.enter_context(open(path, "rb"))
        if derived and rename:
            target = rename(path, src)
        job.src_stat = os.fstat(src.fileno()) if _has_fileno(src) else None
        if job.src_stat is not None:
            _refuse_same(path, stdin, target, job.src_stat)
        regular = job.src_stat is not None and stat.S_ISREG(job.src_stat.st_mode)
        job.size = job.src_stat.st_size if regular else None
        if target is None:
            stats = run(src, _Discard(), job)
        elif target == "-":
            stats = run(src, sys.stdout.buffer, job)
            sys.stdout.buffer.flush()
        else:
            mode = job.src_stat.st_mode & 0o777 if regular and not stdin else None
            with atomic_output(target, force, mode) as dst:
                stats = run(src, dst, job)
    if after is not None:
        after(job, stats, target)
    if remove and not stdin and target not in (None, "-"):
        os.unlink(path)
    if verbose:
        _summary(job.name, stats, test)


def _summary(name, stats, test):
    speed = stats.original_bytes / KB / max(stats.seconds, 1e-9)
    status = "OK, " if test else ""
    click.echo(
        f"{name}: {status}{stats.original_bytes} <-> {stats.compressed_bytes} bytes, "
        f"{stats.bits_per_byte:.4f} bits/byte, {stats.seconds:.2f} s, {speed:.2f} KB/s",
        err=True,
    )


class _Discard:
    def write(self, data):
        return len(data)


# ------------------------------------------------------------------------- entry


# gzip's mode flags on the main command: the command they stand for, and its arguments.
_MODES = {"d": ("decompress",), "z": ("compress",), "l": ("info",), "t": ("decompress", "-t")}
_LONG_MODES = {"--decompress": "d", "--uncompress": "d", "--compress": "z", "--list": "l",
               "--test": "t"}  # fmt: skip
_BUNDLE_LETTERS = set("cdfklnNqtvz")  # the one-letter flags that may share a dash with a mode


def _translate(args):
    """``mambazip -d FILE`` -> ``mambazip decompress FILE`` (and -z, -l, -t, bundles such as
    -dc); other arguments are left to click."""
    if not args or args[0] in cli.commands or args[0] in ("-h", "--help", "-V", "--version"):
        return args
    for i, arg in enumerate(args):
        if arg == "--":
            break
        if arg in _LONG_MODES:
            return [*_MODES[_LONG_MODES[arg]], *args[:i], *args[i + 1 :]]
        letters = arg[1:]
        if arg.startswith("-") and not arg.startswith("--") and letters:
            if not set(letters) <= _BUNDLE_LETTERS or not set(letters) & set("dzlt"):
                continue
            mode = next(m for m in "dzlt" if m in letters)  # -dt: decompress -t
            rest = letters.replace(mode, "", 1)
            return [*_MODES[mode], *args[:i], *([f"-{rest}"] if rest else []), *args[i + 1 :]]
    return args


def _not_a_command(word):
    """gzip users type ``mambazip FILE``: say what to type instead."""
    quoted = shlex.quote(word)
    if word.endswith(".mz"):
        return f"{word!r} is not a command; to decompress it: mambazip decompress {quoted}"
    return (
        f"{word!r} is not a command; to compress it: mambazip compress {quoted} "
        f"(commands: {', '.join(sorted(cli.commands))})"
    )


def run(args, prog_name="mambazip", command=None):
    """Run the command line on ``args``; returns the exit code. Signals (``entry.Interrupted``)
    pass through to the caller, ``entry.run``."""
    if command is None and not args:
        click.echo(f"mambazip: {SHORT_USAGE}", err=True)
        return 2
    target = cli if command is None else cli.commands[command]
    if command is None:
        args = _translate(args)
        if not args[0].startswith("-") and args[0] not in cli.commands:
            _say(_not_a_command(args[0]))
            return 2
    try:
        rv = target.main(args, prog_name=prog_name, standalone_mode=False)
        return rv if isinstance(rv, int) else 0
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except click.UsageError as exc:
        _say(f"{exc.format_message()} (see {prog_name} --help)")
        return 2
    except click.ClickException as exc:
        _say(exc.format_message())
        return exc.exit_code
    except click.exceptions.Abort:  # click's answer to a KeyboardInterrupt it caught
        raise entry.Interrupted(signal.SIGINT) from None
    except BrokenPipeError:
        # The reader went away: say nothing more, and let no flush at exit complain.
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


def main():
    """The ``mambazip`` command (kept for callers of ``mambazip.cli:main``)."""
    entry.main()


from .cli_train import train  # noqa: E402 (it imports from this module)

cli.add_command(train)
