"""The click options that several commands share: input/output flags as gzip has them, the
model and training overrides, the training recipe, the starting model, jobs and the Dask
scheduler, --memlimit; with their parsing callbacks."""

import dataclasses
import functools

import click

from .. import container, limits, workers
from ..config import MIX_MODES, OPTIMIZERS, SCOPE_GROUPS, SCOPES, preset_names
from ..plan import Execution, Limits
from .policy import Files

SUFFIX = Files.suffix


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


memlimit_option = click.option(
    "--memlimit", metavar="SIZE", callback=_memlimit,
    help=f"Refuse work whose model, tables or starting checkpoint need more memory than "
         f"SIZE: bytes, or 512MiB, 2G (powers of 1024, as in xz) "
         f"[default: {limits.format_bytes(limits.DEFAULT_MEMLIMIT)}].",
)  # fmt: skip


def parse_frame_size(ctx, param, value):
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


def parse_byte_range(ctx, param, value):
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


def pack(name, build, *keys):
    """The command receives its options ``keys`` as one argument ``name``, ``build(**their
    values)``: what travels together is one value. Goes right under ``click.command``."""

    def decorate(f):
        @functools.wraps(f)
        def command(*args, **kwargs):
            values = {key: kwargs.pop(key) for key in keys}
            return f(*args, **kwargs, **{name: build(**values)})

        return command

    return decorate


IO_KEYS = tuple(f.name for f in dataclasses.fields(Files))
files_pack = pack("io", Files, *IO_KEYS)


def _execution(jobs, scheduler, scheduler_timeout):
    if scheduler is None and scheduler_timeout is not None:
        raise click.UsageError("--scheduler-timeout needs --scheduler")
    return Execution(jobs=jobs_or_cores(jobs), scheduler=scheduler_of(scheduler, scheduler_timeout))


execution_pack = pack("execution", _execution, "jobs", "scheduler", "scheduler_timeout")
limits_pack = pack("limits", Limits, "memlimit", "replay_chunk")


@dataclasses.dataclass(frozen=True)
class ModelPaths:
    """--model and --resume as given."""

    model_path: str = None
    resume_path: str = None


model_pack = pack("model", ModelPaths, "model_path", "resume_path")


def stack_options(*options):
    """One decorator for several click options, shown in the order given."""

    def decorate(f):
        for option in reversed(options):
            f = option(f)
        return f

    return decorate


jobs_options = stack_options(
    click.option("-T", "--jobs", type=click.IntRange(min=0),
                 help=f"Code this many frames at once, in worker processes (0: one per "
                      f"core, here {workers.default_jobs()}; 1: in this process). The "
                      f"output is the same for any number [default: 0]."),
    click.option("--scheduler", metavar="ADDRESS",
                 help="Code the frames on the Dask cluster of this scheduler (e.g. "
                      "tcp://10.0.0.5:8786); its workers need the same mambazip installed."),
    click.option("--scheduler-timeout", metavar="SECONDS",
                 type=click.FloatRange(min=0, min_open=True),
                 help=f"With --scheduler: give up (exit 1) after this long without "
                      f"progress (no frame finished, no worker coding one heard from), e.g. "
                      f"when all its workers are gone [default: {workers.DEFAULT_TIMEOUT:g}]."),
)  # fmt: skip


def jobs_or_cores(jobs):
    return jobs or workers.default_jobs()


def scheduler_of(address, timeout):
    if address is None:
        return None
    return workers.Scheduler(address, workers.DEFAULT_TIMEOUT if timeout is None else timeout)


def _suffix(ctx, param, value):
    if not value or "/" in value or value in (".", ".."):
        raise click.BadParameter(f"{value!r} is not a file name suffix")
    return value


def io_options(force_help, no_name_help):
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
            click.option("-r", "--recursive", is_flag=True,
                         help="Work on every file under the directories given, as gzip -r: "
                              "symbolic links under them are left alone."),
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


start_options = stack_options(
    click.option("--model", "model_path", type=click.Path(),
                 help="Start from this model's weights with fresh optimizer state: a "
                      "checkpoint of ours, a Hugging Face or mamba_ssm folder or "
                      ".safetensors file."),
    click.option("--resume", "resume_path", type=click.Path(),
                 help="Start from this checkpoint's weights, Adam moments and step (and "
                      "the training settings saved with it)."),
)  # fmt: skip


# The training recipe beyond lr and bptt (config.TrainConfig); compress and train share them.
recipe_options = stack_options(
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
    click.option("--rerun/--no-rerun", default=None,
                 help="After each update, run the segment again with the new weights so "
                      "that the next byte is fed from the state they reach (the default); "
                      "--no-rerun feeds it from the state already computed: a forward per "
                      "byte less (needs --bptt > 1, no --horizon)."),
    click.option("--overlap/--no-overlap", default=None,
                 help="Take each update's gradient while the next segment is coded, on a "
                      "second core when there is one: the weights land a segment late "
                      "(needs --no-rerun; no --horizon, replay or --iters)."),
)  # fmt: skip


def train_options(f):
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
        recipe_options,
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
        start_options,
    ]  # fmt: skip
    for option in reversed(options):
        f = option(f)
    return f


def option_names(decorator):
    """The parameter names of the click options ``decorator`` adds."""
    return tuple(p.name for p in decorator(lambda: None).__click_params__)


@dataclasses.dataclass(frozen=True)
class Request:
    """What the options ask a run to start from: the preset with ``overrides`` of its shape
    and training, the seed, --mix, --prior and --model/--resume."""

    preset: str = "default"
    overrides: dict = dataclasses.field(default_factory=dict)
    seed: int = None
    mix: str = None
    prior: str = "preset"
    model: ModelPaths = ModelPaths()

    @classmethod
    def of(cls, preset, seed, mix, prior, model_path, resume_path, **overrides):
        return cls(preset, overrides, seed, mix, prior, ModelPaths(model_path, resume_path))


request_pack = pack("request", Request.of, *option_names(train_options))


save_option = click.option(
    "--save-model",
    type=click.Path(dir_okay=False),
    help="Save the model the file ends in, with its optimizer state, to this checkpoint.",
)


replay_option = click.option(
    "--replay-chunk",
    type=click.IntRange(min=1),
    help="Keep truncated-BPTT activations for this many bytes and replay the rest of a "
    "segment (less memory, more time; the output is the same).",
)
