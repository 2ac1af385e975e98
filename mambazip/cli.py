"""mambazip command line: parses, calls the library, reports. Messages go to stderr.

Exit codes: 0 success, 1 error in data or files, 2 usage error, 130 interrupted.
"""

import contextlib
import dataclasses
import json
import os
import signal
import sys

import click
import numpy as np
from tqdm import tqdm

from . import checkpoint, codec, container
from .config import OPTIMIZERS, SCOPES, preset_names, resolve_settings
from .errors import ConfigError, MambazipError
from .files import atomic_output

SUFFIX = ".mz"
PROGRESS_MIN_BYTES = 1 << 16

EXIT_HELP = """\b
Exit codes: 0 success, 1 error in data or files (one line on stderr, no output left
behind), 2 usage error, 130 interrupted."""


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


def _io_options(f):
    options = [
        click.argument("files", nargs=-1, type=click.Path(dir_okay=False, allow_dash=True)),
        click.option("-o", "--output", type=click.Path(dir_okay=False, allow_dash=True),
                     help="Write to this file (one input only); - for stdout."),
        click.option("-c", "--stdout", "to_stdout", is_flag=True, help="Write to stdout."),
        click.option("-f", "--force", is_flag=True,
                     help="Overwrite existing outputs; write compressed data to a terminal."),
        click.option("-k", "--keep", is_flag=True,
                     help="Keep input files (the default; see --rm)."),
        click.option("--rm", "remove", is_flag=True,
                     help="Delete each input after its output is written."),
        click.option("-q", "--quiet", is_flag=True, help="No progress bar, no warnings."),
        click.option("-v", "--verbose", is_flag=True, help="Print a summary line per file."),
    ]  # fmt: skip
    for option in reversed(options):
        f = option(f)
    return f


@click.group(context_settings={"help_option_names": ["-h", "--help"]}, epilog=EXIT_HELP)
@click.version_option(package_name="mambazip")
def cli():
    """Lossless compression by a Mamba-1 model that learns the file while coding it."""


MODEL_KEYS = ("d_model", "n_layer", "d_inner", "d_state", "d_conv", "dt_rank")


def _start_options(f):
    options = [
        click.option("--model", "model_path", type=click.Path(),
                     help="Start from this model's weights with fresh optimizer state: a "
                          "checkpoint of ours, a Hugging Face or mamba_ssm folder or "
                          ".safetensors file."),
        click.option("--resume", "resume_path", type=click.Path(),
                     help="Start from this checkpoint's weights, Adam moments and step (and "
                          "the training settings saved with it)."),
    ]  # fmt: skip
    for option in reversed(options):
        f = option(f)
    return f


def _train_options(f):
    options = [
        click.option("--preset", default="default", show_default=True,
                     help=f"Model and training preset from models/ ({', '.join(preset_names())})."),
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
        click.option("--seed", type=int, help="Seed of the initial weights."),
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


def _load_start(model_path, resume_path, quiet):
    """(checkpoint or None, resume) from --model / --resume."""
    if model_path and resume_path:
        raise click.UsageError("--model and --resume exclude each other")
    path = model_path or resume_path
    if path is None:
        return None, False
    try:
        start = checkpoint.load(path)
    except MambazipError as exc:
        raise click.ClickException(str(exc)) from None
    notices = list(start.notices)
    if resume_path and start.moments is None:
        notices.append(f"{path}: no Adam moments in this checkpoint; they start from zero")
    if not quiet:
        for notice in notices:
            _say(f"note: {notice}")
    return start, bool(resume_path)


def _settings(preset, seed, opts, start, resume):
    """Settings from the preset and options, or for a starting checkpoint, whose shape wins
    over the preset and must not be contradicted by explicit shape options."""
    shape = {k: opts.pop(k) for k in MODEL_KEYS}
    try:
        if start is None:
            return resolve_settings(preset, model=shape, train=opts, seed=seed)
        for key, value in shape.items():
            have = getattr(start.config, key)
            if value is not None and value != have:
                flag = "--" + key.replace("_", "-")
                raise click.UsageError(f"{flag} {value} contradicts the model's {key} {have}")
        return start.settings_for(resume, preset, train=opts, seed=seed)
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None


def _check_save(path, files, force, option="--save-model"):
    """Refuse before the work rather than after it."""
    if path is None:
        return
    if len(files) > 1:
        raise click.UsageError(f"{option} takes one input file")
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
        checkpoint.save(save_model, stats.learner, force)
    return stats


@cli.command(epilog=EXIT_HELP)
@_io_options
@_train_options
@_save_option
@_replay_option
def compress(files, output, to_stdout, force, keep, remove, quiet, verbose, preset, seed,
             model_path, resume_path, save_model, replay_chunk, **opts):  # fmt: skip
    """Compress FILES (- or none: stdin) to FILE.mz."""
    start, resume = _load_start(model_path, resume_path, quiet)
    settings = _settings(preset, seed, opts, start, resume)
    _check_save(save_model, files, force)

    def run(src, dst, size, name):
        with _progress(size, name, quiet) as progress:
            stats = codec.compress_stream(src, dst, settings, progress=progress, model=start,
                                          resume=resume, replay_chunk=replay_chunk)  # fmt: skip
        return _save(save_model, stats, force)

    _each(files, output, to_stdout, force, remove, verbose, run,
          name_output=lambda path: path + SUFFIX, binary_out=True)  # fmt: skip


@cli.command(epilog=EXIT_HELP)
@_io_options
@click.option("-t", "--test", is_flag=True, help="Check the files; write nothing.")
@_start_options
@_save_option
@_replay_option
def decompress(files, output, to_stdout, force, keep, remove, quiet, verbose, test,
               model_path, resume_path, save_model, replay_chunk):  # fmt: skip
    """Decompress FILES.mz (- or none: stdin) and verify their checksums. A file compressed
    from a starting model needs the same model, given with the same option."""
    start, resume = _load_start(model_path, resume_path, quiet)
    _check_save(save_model, files, force)

    def run(src, dst, size, name):
        with _progress(None, name, quiet) as progress:
            stats = codec.decompress_stream(src, dst, progress=progress, model=start,
                                            resume=resume, replay_chunk=replay_chunk)  # fmt: skip
        return _save(save_model, stats, force)

    def name_output(path):
        if not path.endswith(SUFFIX):
            raise MambazipError(f"unknown suffix, expected {SUFFIX}; use -o to name the output")
        return path[: -len(SUFFIX)]

    if test:
        _each(files, None, False, force, False, verbose, run, name_output, test=True)
    else:
        _each(files, output, to_stdout, force, remove, verbose, run, name_output)


@cli.command(epilog=EXIT_HELP)
@click.argument("files", nargs=-1, required=True,
                type=click.Path(dir_okay=False, allow_dash=True))  # fmt: skip
@_train_options
@click.option("--json", "as_json", is_flag=True,
              help="Print one JSON object per file: bytes, ideal_bits, bits_per_byte, "
                   "coded_bytes, coded_bits_per_byte, seconds, bytes_per_second.")  # fmt: skip
@click.option("--per-byte", type=click.Path(dir_okay=False),
              help="Write each byte's -log2 p as a float64 .npy (one input only).")  # fmt: skip
@_save_option
@click.option("-f", "--force", is_flag=True, help="Overwrite existing outputs.")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar, no notes.")
def score(files, preset, seed, model_path, resume_path, as_json, per_byte, save_model, force,
          quiet, **opts):  # fmt: skip
    """Run the online loop of compress over FILES and report how well the model predicts
    them, writing no compressed file. bits_per_byte is the ideal code length, the sum of
    -log2 p over every byte (the first predicted after the priming byte 0); coded_bytes is
    what compress would write, header included. --optimizer none: inference only."""
    start, resume = _load_start(model_path, resume_path, quiet)
    settings = _settings(preset, seed, opts, start, resume)
    _check_save(save_model, files, force)
    _check_save(per_byte, files, force, "--per-byte")
    failed = False
    for path in files:
        bits = []
        try:
            stats = _score_one(path, settings, start, resume, quiet, bits)
            if per_byte is not None:
                with atomic_output(per_byte, force) as f:
                    np.save(f, np.concatenate([np.zeros(0), *bits]))
            _save(save_model, stats, force)
        except (MambazipError, OSError) as exc:
            _say(_describe(path, exc))
            failed = True
            continue
        _report_score(path, stats, as_json)
    if failed:
        sys.exit(1)


def _score_one(path, settings, start, resume, quiet, bits):
    name = "stdin" if path == "-" else os.path.basename(path)
    with contextlib.ExitStack() as stack:
        src = sys.stdin.buffer if path == "-" else stack.enter_context(open(path, "rb"))
        size = None if path == "-" else os.fstat(src.fileno()).st_size
        with _progress(size, name, quiet) as progress:
            return codec.compress_stream(src, _Discard(), settings, progress=progress,
                                         model=start, resume=resume, per_byte=bits)  # fmt: skip


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
        f"{report['bytes_per_second'] / 1000:.2f} KB/s"
    )


@cli.command(epilog=EXIT_HELP)
@click.argument("src", type=click.Path())
@click.argument("dst", type=click.Path(dir_okay=False))
@click.option("-f", "--force", is_flag=True, help="Overwrite DST if it exists.")
@click.option("-q", "--quiet", is_flag=True, help="No notes.")
@click.option("-v", "--verbose", is_flag=True, help="Print what was converted.")
def convert(src, dst, force, quiet, verbose):
    """Convert a model to a mambazip checkpoint: a Hugging Face or mamba_ssm folder or
    .safetensors file (F32/F16/BF16, sharded or not), or a checkpoint of ours."""
    start, _ = _load_start(src, None, quiet)
    if start.settings is None:
        # Models from elsewhere carry no training settings: record the default preset's.
        start.settings = start.settings_for(resume=False)
    try:
        checkpoint.write(dst, start, force)
    except (MambazipError, OSError) as exc:
        raise click.ClickException(_describe(dst, exc)) from None
    if verbose:
        moments = "with Adam moments" if start.moments is not None else "weights only"
        _say(f"{dst}: {_fields(dataclasses.asdict(start.config))}, {moments}")


@cli.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
def info(files):
    """Show the header of .mz FILES: sizes, bits/byte, model and training settings."""
    failed = False
    for path in files:
        try:
            with open(path, "rb") as f:
                header = container.read_header(f)
                length, crc, size = _scan_to_end(f, header["block_size"])
        except (MambazipError, OSError) as exc:
            _say(_describe(path, exc))
            failed = True
            continue
        settings = header["settings"].to_dict()
        bpb = 8.0 * size / length if length else 0.0
        click.echo(f"{path}:")
        click.echo(f"  format version   {header['version']}")
        click.echo(f"  original size    {length} bytes (crc32 {crc:08x})")
        click.echo(f"  compressed size  {size} bytes, {bpb:.4f} bits/byte")
        click.echo(f"  block size       {header['block_size']}")
        click.echo(f"  model            {_fields(settings['model'])}")
        # Every field, bptt included (the header of a format-1 file leaves it out: it is 1).
        train = dataclasses.asdict(header["settings"].train)
        click.echo(f"  training         {_fields(train)}")
        click.echo(f"  seed             {settings['seed']}")
        if header["model_sha256"]:
            flag = "--resume" if header["model_resume"] else "--model"
            click.echo(f"  starting model   sha256 {header['model_sha256']} ({flag})")
    sys.exit(1 if failed else 0)


def _fields(d):
    def show(v):
        return ",".join(v) if isinstance(v, (list, tuple)) else v

    return " ".join(f"{k}={show(v)}" for k, v in d.items())


def _scan_to_end(f, block_size):
    for n_bytes, words in container.read_blocks(f, block_size):
        if n_bytes == "end":
            length, crc = words
            return length, crc, f.tell()
    raise AssertionError("read_blocks always ends with the trailer")


@contextlib.contextmanager
def _progress(total, name, quiet):
    """A tqdm bar on stderr when it is a terminal and the input is worth waiting for."""
    show = not quiet and sys.stderr.isatty() and (total is None or total >= PROGRESS_MIN_BYTES)
    if not show:
        yield _check_interrupt
        return
    # Updates come once per 4 KB chunk, a few a second: draw every one of them.
    bar = tqdm(total=total, desc=name, unit="B", unit_scale=True, unit_divisor=1024,
               file=sys.stderr, leave=False, dynamic_ncols=True, mininterval=0)  # fmt: skip
    done = [0, 0.0]

    def update(n_bytes, bits):
        _check_interrupt()
        done[0] += n_bytes
        done[1] += bits
        if done[1]:
            bar.set_postfix_str(f"{done[1] / done[0]:.3f} bits/byte", refresh=False)
        bar.update(n_bytes)

    try:
        yield update
    finally:
        bar.close()


def _describe(path, exc):
    if isinstance(exc, OSError):
        return f"{exc.filename or path}: {exc.strerror or exc}"
    return f"{path}: {exc}"


def _each(files, output, to_stdout, force, remove, verbose, run, name_output, test=False,
          binary_out=False):  # fmt: skip
    files = files or ("-",)
    if output is not None and len(files) > 1:
        raise click.UsageError("-o/--output takes one input file")
    if output is not None and to_stdout:
        raise click.UsageError("-o and -c exclude each other")
    failed = False
    for path in files:
        try:
            _one(path, output, to_stdout, force, remove, verbose, run, name_output, test,
                 binary_out)  # fmt: skip
        except (MambazipError, OSError) as exc:
            _say(_describe(path, exc))
            failed = True
    if failed:
        sys.exit(1)


def _one(path, output, to_stdout, force, remove, verbose, run, name_output, test, binary_out):
    stdin = path == "-"
    if test:
        target = None
    elif to_stdout or output == "-" or (stdin and output is None):
        target = "-"
    else:
        target = output or name_output(path)
    if target == "-" and binary_out and sys.stdout.isatty() and not force:
        raise MambazipError("compressed data not written to a terminal; use -f to force")
    name = "stdin" if stdin else os.path.basename(path)
    with contextlib.ExitStack() as stack:
        src = sys.stdin.buffer if stdin else stack.enter_context(open(path, "rb"))
        size = None if stdin else os.fstat(src.fileno()).st_size
        if target is None:
            stats = run(src, _Discard(), size, name)
        elif target == "-":
            stats = run(src, sys.stdout.buffer, size, name)
            sys.stdout.buffer.flush()
        else:
            mode = None if stdin else os.fstat(src.fileno()).st_mode & 0o777
            with atomic_output(target, force, mode) as dst:
                stats = run(src, dst, size, name)
    if remove and not stdin and target not in (None, "-"):
        os.unlink(path)
    if verbose:
        _summary(name, stats, test)


def _summary(name, stats, test):
    speed = stats.original_bytes / 1000 / max(stats.seconds, 1e-9)
    status = "OK, " if test else ""
    click.echo(
        f"{name}: {status}{stats.original_bytes} <-> {stats.compressed_bytes} bytes, "
        f"{stats.bits_per_byte:.4f} bits/byte, {stats.seconds:.2f} s, {speed:.2f} KB/s",
        err=True,
    )


class _Discard:
    def write(self, data):
        return len(data)


class _Interrupted(BaseException):
    """Ctrl-C. Not a KeyboardInterrupt, which click would answer with a blank line."""


_interrupt_seen = []


def _interrupt(signum, frame):
    # Interrupting Numba while it compiles or loads its cache breaks LLVM objects (and inside
    # its ctypes callbacks the exception is swallowed): there, the signal is only recorded
    # and raised at the next progress report.
    _interrupt_seen.append(signum)
    if not _inside_numba(frame):
        raise _Interrupted


def _inside_numba(frame):
    while frame is not None:
        if frame.f_globals.get("__name__", "").startswith(("numba", "llvmlite")):
            return True
        frame = frame.f_back
    return False


def _check_interrupt(n_bytes=0, bits=0.0):
    if _interrupt_seen:
        raise _Interrupted


def main():
    previous = signal.signal(signal.SIGINT, _interrupt)
    try:
        cli.main(prog_name="mambazip", standalone_mode=False)
    except click.UsageError as exc:
        _say(f"{exc.format_message()} (see mambazip --help)")
        sys.exit(2)
    except click.ClickException as exc:
        _say(exc.format_message())
        sys.exit(exc.exit_code)
    except (_Interrupted, click.exceptions.Abort):
        _say("interrupted")
        sys.exit(130)
    except BrokenPipeError:
        sys.stderr.close()
        sys.exit(1)
    finally:
        signal.signal(signal.SIGINT, previous)
