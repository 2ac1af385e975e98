"""``mambazip train``: pretrain a preset's Mamba on files and folders (see ``trainer``)."""

import dataclasses
import os
import re
import time

import click

from .. import kernel_cache, limits, plan, signals, trainer
from ..config import OPTIMIZERS, preset_names
from ..errors import ConfigError, MambazipError
from ..files import atomic_output, same_file
from .common import EXIT_HELP, KB, describe, format_kb, say
from .options import memlimit_option, pack, recipe_options
from .progress import compile_note, progress_bar

RESUME_SUFFIX = ".resume"
_SECONDS = re.compile(r"(\d+(?:\.\d*)?)\s*(s|min|h)")
_SECOND_UNITS = {"s": 1, "min": 60, "h": 3600}


def _every(ctx, param, value):
    """(bytes, seconds), one of them None: ``600s``, ``10min``, ``1h``, or a size."""
    match = _SECONDS.fullmatch(value.strip())
    if match:
        seconds = float(match.group(1)) * _SECOND_UNITS[match.group(2)]
        if seconds <= 0:
            raise click.BadParameter(f"{value!r}: must be more than 0 seconds")
        return None, seconds
    try:
        return limits.parse_size(value), None
    except ValueError:
        raise click.BadParameter(
            f"{value!r} is neither a time (600s, 10min, 1h) nor a size (64MiB, 1G)"
        ) from None


def _fraction(ctx, param, value):
    if not 0.0 <= value < 1.0:
        raise click.BadParameter(f"{value} is not in [0, 1)")
    return value


@dataclasses.dataclass(frozen=True)
class _Saving:
    """--save-model, --checkpoint (default: OUT.resume), --checkpoint-every, -f."""

    out: str
    checkpoint_path: str
    every: tuple
    force: bool

    def __post_init__(self):
        if self.checkpoint_path is None:
            object.__setattr__(self, "checkpoint_path", self.out + RESUME_SUFFIX)


@dataclasses.dataclass(frozen=True)
class _Course:
    """--epochs, --resume, --holdout, --between."""

    epochs: int
    resume_path: str
    holdout: float
    between: str


@click.command(epilog=EXIT_HELP)
@pack("saving", _Saving, "out", "checkpoint_path", "every", "force")
@pack("course", _Course, "epochs", "resume_path", "holdout", "between")
@click.argument("inputs", nargs=-1, required=True, type=click.Path())
@click.option(
    "--preset",
    default="default",
    show_default=True,
    help=f"The preset whose Mamba to train ({', '.join(preset_names())}).",
)
@click.option(
    "--save-model",
    "out",
    required=True,
    type=click.Path(dir_okay=False),
    help="Write the trained model (weights, Adam moments, step) to this checkpoint.",
)
@click.option(
    "--epochs",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Passes over the training documents (with --resume: in all).",
)
@click.option(
    "--resume",
    "resume_path",
    type=click.Path(dir_okay=False),
    help="Continue the run saved in this trainer checkpoint (same inputs, preset "
    "and options); the result is the uninterrupted run's, bit for bit.",
)
@click.option(
    "--holdout",
    type=float,
    default=0.0,
    show_default=True,
    callback=_fraction,
    help="Hold out this fraction of the documents (by a hash of their relative "
    "path) and report their bits/byte after each epoch; a heldout.txt in a "
    "folder given lists more.",
)
@click.option(
    "--between",
    type=click.Choice(trainer.BETWEEN),
    help="Between documents: a separator byte 0 with the state running on, or a "
    f"reset to the zero state [default: {trainer.DEFAULT_BETWEEN}].",
)
@click.option(
    "--checkpoint",
    "checkpoint_path",
    type=click.Path(dir_okay=False),
    help=f"The trainer checkpoint to keep for --resume [default: OUT{RESUME_SUFFIX}].",
)
@click.option(
    "--checkpoint-every",
    "every",
    default="10min",
    show_default=True,
    callback=_every,
    help="Write the trainer checkpoint this often: a time (600s, 10min, 1h) or a "
    "number of bytes learned (64MiB); and after every epoch.",
)
@click.option("--optimizer", type=click.Choice(OPTIMIZERS), help="Optimizer.")
@click.option("--lr", type=float, help="Learning rate.")
@click.option("--clip", type=float, help="Element-wise gradient clip (0: none).")
@click.option("--bptt", type=int, help="Truncated BPTT: one update per this many bytes.")
@click.option("--warmup", type=int, help="Learning-rate warm-up, in bytes.")
@click.option("--decay", type=int, help="Decay lr by sqrt(decay / t) after t > decay bytes.")
@recipe_options
@click.option("--seed", type=int, help="Seed of the initial weights.")
@memlimit_option
@click.option(
    "-f", "--force", is_flag=True, help="Overwrite OUT and the trainer checkpoint if they exist."
)
@click.option("-q", "--quiet", is_flag=True, help="No progress, no per-epoch lines.")
@click.option(
    "-v",
    "--verbose",
    is_flag=True,
    help="Progress also when stderr is not a terminal (a line every few seconds).",
)
def train(inputs, preset, saving, course, memlimit, quiet, verbose, **opts):
    """Train the Mamba of a preset on INPUTS (files, and folders read recursively in sorted
    order), one document after another, with the kernels and online training of compress;
    save it for compress --model OUT. The context models are not trained (they start empty
    in every file). A trainer checkpoint is written as it goes, for --resume."""
    if opts.get("overlap") is None:
        # A preset's overlap is a coding speed choice; a trainer checkpoint holds no
        # update in flight (trainer.Training).
        opts["overlap"] = False
    try:
        settings = plan.start(preset, opts, opts.pop("seed"), prior=False).settings
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None
    _check_outputs(inputs, saving, course.resume_path)
    try:
        corpus = trainer.find_documents(inputs, course.holdout)
        _train(corpus, settings, course, saving, memlimit, quiet, verbose)
    except (MambazipError, OSError, MemoryError) as exc:
        message = str(exc) if isinstance(exc, MambazipError) else describe(saving.out, exc)
        raise click.ClickException(message) from None


def _check_outputs(inputs, saving, resume_path):
    """Refuse before the work: existing outputs without -f (the trainer checkpoint being
    resumed from is expected to exist), and outputs that are inputs or each other."""
    out, checkpoint_path, force = saving.out, saving.checkpoint_path, saving.force
    if out == checkpoint_path or same_file(out, checkpoint_path):
        raise click.UsageError("--save-model and --checkpoint name the same file")
    for path in (out, checkpoint_path):
        for given in inputs:
            if same_file(given, path) or os.path.abspath(given) == os.path.abspath(path):
                raise click.ClickException(f"{path}: names an input; nothing written")
    resumed = resume_path is not None and (
        resume_path == checkpoint_path or same_file(resume_path, checkpoint_path)
    )
    for path in (out, checkpoint_path):
        if os.path.lexists(path) and not force and not (path == checkpoint_path and resumed):
            raise click.ClickException(f"{path} already exists; use -f to overwrite")


def _train(corpus, settings, course, saving, memlimit, quiet, verbose):
    epochs, between = course.epochs, course.between
    if course.resume_path is not None:
        run = trainer.Training.resume(course.resume_path, corpus, settings, between, memlimit)
    else:
        run = trainer.Training(corpus, settings, between or trainer.DEFAULT_BETWEEN)
    mamba = dataclasses.replace(settings, mix=None)  # the context side is not trained
    compile_note(mamba, quiet)
    if not quiet:
        held = sum(doc.size for doc in corpus.heldout)
        say(f"{len(corpus.train)} training documents ({format_kb(run.train_bytes)} an epoch), "
             f"{len(corpus.heldout)} held out ({format_kb(held)}); between documents: "
             f"{run.between}")  # fmt: skip
    every_bytes, every_seconds = saving.every
    checkpointer = trainer.Checkpointer(saving.checkpoint_path, every_bytes, every_seconds)
    start, learned = time.monotonic(), 0
    while run.position.epoch < epochs:
        epoch = run.position.epoch
        left = run.train_bytes - trainer.epoch_bytes_done(run)
        name = f"epoch {epoch + 1}/{epochs}"
        with progress_bar(left, name, quiet, verbose) as progress:
            # The held-out pass reports nothing to the bar but must still see signals.
            result = run.epoch(progress, checkpointer, signals.check)
        learned += left
        if not quiet:
            line = f"{name}: {progress.bits / max(left, 1):.4f} bits/byte learned"
            if result is not None:
                line += f", held-out {result:.4f} bits/byte"
            say(line)
    kernel_cache.mark(mamba)
    with atomic_output(saving.out, saving.force) as f:
        f.write(run.model().to_bytes())
    if not quiet:
        seconds = time.monotonic() - start
        say(f"{saving.out}: saved; {format_kb(learned)} learned in {seconds:.0f} s "
             f"({learned / KB / max(seconds, 1e-9):.2f} KB/s)")  # fmt: skip
