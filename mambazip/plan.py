"""One run's plan, resolved once at the boundary (the command line, ``mambazip.compress``,
the trainer): where it starts (``Start``: the settings and the model or prior), what it may
use (``Limits``), how it runs (``Execution``) and how the stream is laid out (``Layout``).
The codec takes ``(source, destination, plan, observer)`` and decides nothing of this again.

This is the one place where a preset and overrides become settings, where a checkpoint's
shape and saved training settings win over the preset's, and where a prior is chosen: the
preset's for compressing, the one a header names for decompressing.
"""

import dataclasses
from dataclasses import dataclass, field

from . import checkpoint, container, priors
from .config import MIX_MODES, ModelConfig, Settings, load_preset, resolve_settings
from .errors import CheckpointError, ConfigError

MODEL_KEYS = tuple(f.name for f in dataclasses.fields(ModelConfig))


@dataclass(frozen=True)
class Start:
    """The settings (None when decoding: the header has them) and the model to start from:
    ``model`` a ``checkpoint.Checkpoint`` (``resume``: with its optimizer state and saved
    training settings), or else ``prior``, a preset's prior that starts an input that looks
    like text (``priors.looks_like_text``). ``notices``: what loading the model had to say.
    ``binary_settings``: the settings of an input that does not look like text, where the
    preset's mix has its own for those (its "binary_mix")."""

    settings: Settings = None
    model: object = None
    resume: bool = False
    prior: object = None
    notices: tuple = ()
    prior_settings: Settings = None
    binary_settings: Settings = None

    def for_input(self, first_block):
        """This start for an input beginning with ``first_block``. When the input looks like
        text, the prior becomes the model, with ``prior_settings`` (the recipe of a Mamba
        that starts from it) when there are any; otherwise the prior is dropped and, unless
        the input is empty (it is neither kind: it keeps the preset's own settings),
        ``binary_settings``, when there are any, replace the settings."""
        model, settings = self.model, self.settings
        text = priors.looks_like_text(first_block)
        if text and model is None and self.prior is not None:
            model, settings = self.prior, self.prior_settings or settings
        elif first_block and not text:
            settings = self.binary_settings or settings
        return dataclasses.replace(self, settings=settings, model=model, prior=None,
                                   prior_settings=None, binary_settings=None)  # fmt: skip


@dataclass(frozen=True)
class Limits:
    """``memlimit``: bytes the predictor and the frames in flight may take (None:
    ``limits.DEFAULT_MEMLIMIT``); ``replay_chunk``: see ``model.OnlineLearner`` (it bounds
    the memory of truncated BPTT and changes no bit)."""

    memlimit: int = None
    replay_chunk: int = None


@dataclass(frozen=True)
class Execution:
    """``frame_size``: cut the input into frames of this many bytes (0: one frame of any
    length; None: the stream's own choice, one frame with mixing, unframed otherwise), coded
    by up to ``jobs`` worker processes, or on the Dask cluster of ``scheduler`` (an address
    or a ``workers.Scheduler``). Nothing here changes a bit of the output."""

    frame_size: int = None
    jobs: int = 1
    scheduler: object = None


@dataclass(frozen=True)
class Layout:
    """How the stream is written: ``block_size`` bytes per range-coded block;
    ``stored_blocks`` whether a block that codes worse than raw is stored raw (True: always,
    which writes version 3 at least; None: when the file is version 3 anyway, so that the
    Mamba alone writes the files of versions 1 and 2; False: never); ``version`` 3 or 4 writes
    mixing settings as those versions did (how their golden files are reproduced);
    ``small_input``: the settings came from a preset, so a short input codes with their
    small-input counterpart (``container.small_input_settings``); given settings are kept;
    ``transforms`` whether segments of the input that a transform changes (deflate streams,
    x86 code: ``mambazip.transforms``) are coded transformed (version 7; False: ``--transforms
    none``, a file without transform records)."""

    block_size: int = container.DEFAULT_BLOCK
    stored_blocks: bool = None
    version: int = None
    small_input: bool = False
    transforms: bool = True


@dataclass(frozen=True)
class Plan:
    start: Start = field(default_factory=Start)
    limits: Limits = field(default_factory=Limits)
    execution: Execution = field(default_factory=Execution)
    layout: Layout = field(default_factory=Layout)


_PARTS = {"start": Start, "limits": Limits, "execution": Execution, "layout": Layout}


def from_options(**fields):
    """A Plan from the fields of its parts by name (``settings``, ``model``, ``memlimit``,
    ``jobs``, ``block_size``...), as the library's stream functions take them."""
    parts = {}
    for name, part in _PARTS.items():
        names = {f.name for f in dataclasses.fields(part)}
        parts[name] = part(**{k: fields.pop(k) for k in names & fields.keys()})
    if fields:
        raise TypeError(f"unknown option(s): {', '.join(sorted(fields))}")
    return Plan(**parts)


def from_checkpoint(model=None, resume=None, memlimit=None):
    """The Start of the model given by path, ``model`` (weights, fresh optimizer) or
    ``resume`` (also its optimizer state); settings to be resolved."""
    if model and resume:
        raise ConfigError("--model and --resume exclude each other")
    path = model or resume
    if path is None:
        return Start()
    loaded = checkpoint.load(path, memlimit=memlimit)
    notices = list(loaded.notices)
    if resume and loaded.moments is None:
        notices.append(f"{path}: no Adam moments in this checkpoint; they start from zero")
    return Start(model=loaded, resume=bool(resume), notices=tuple(notices))


def start(preset="default", overrides=None, seed=None, mix=None, given=None, prior=True,
          memlimit=None):  # fmt: skip
    """The Start of a run of ``preset`` with ``overrides`` ({field: value} of the model's shape
    and its training; None values are ignored), ``seed`` and ``mix`` (one of MIX_MODES),
    from ``given`` (a ``from_checkpoint`` Start: its checkpoint's shape wins over the preset
    and must not be contradicted) or else, with ``prior``, from the preset's prior."""
    given = given or Start()
    overrides = {k: v for k, v in (overrides or {}).items() if v is not None}
    shape = {k: overrides.pop(k) for k in MODEL_KEYS if k in overrides}
    if given.model is None:
        settings = resolve_settings(preset, model=shape, train=overrides, seed=seed, mix=mix)
        binary = resolve_settings(preset, model=shape, train=overrides, seed=seed, mix=mix,
                                  binary=True)  # fmt: skip
        binary = None if binary == settings else binary
        chosen = prior_for(preset, settings, memlimit) if prior else None
        if chosen is None:
            return Start(settings, binary_settings=binary)
        with_prior = resolve_settings(preset, model=shape, train=overrides, seed=seed, mix=mix,
                                      from_prior=True)  # fmt: skip
        return Start(settings, prior=chosen, prior_settings=with_prior, binary_settings=binary)
    for key, value in shape.items():
        have = getattr(given.model.config, key)
        if value != have:
            raise ConfigError(f"--{key.replace('_', '-')} {value} contradicts the model's {key} "
                              f"{have}")  # fmt: skip
    if mix == "cm":
        raise ConfigError("--mix cm leaves out the Mamba that --model/--resume start")
    settings = settings_for(given.model, given.resume, preset, overrides, seed, mix)
    binary = settings_for(given.model, given.resume, preset, overrides, seed, mix, binary=True)
    return dataclasses.replace(given, settings=settings,
                               binary_settings=None if binary == settings else binary)  # fmt: skip


def settings_for(model, resume, preset="default", train=None, seed=None, mix=None,
                 binary=False):  # fmt: skip
    """Settings to train the checkpoint ``model`` with: the shape is the checkpoint's;
    training and mixing settings are the checkpoint's own when resuming one of ours, else
    the preset's (with ``binary``, its mix for an input that does not look like text);
    ``train`` (None values ignored), ``seed`` and ``mix`` override."""
    if resume and model.settings is not None:
        saved = model.settings.to_dict()
        base, base_seed, base_mix = saved["train"], model.settings.seed, saved.get("mix")
    else:
        data = load_preset(preset, binary=binary)
        base, base_seed, base_mix = data.get("train", {}), data.get("seed", 0), data.get("mix")
    if mix is not None:
        if mix not in MIX_MODES:
            raise ConfigError(f"mix must be one of {', '.join(MIX_MODES)}, got {mix!r}")
        base_mix = None if mix == "none" else {**(base_mix or {}), "mamba": mix == "full"}
    overrides = {k: v for k, v in (train or {}).items() if v is not None}
    data = {
        "model": dataclasses.asdict(model.config),
        "train": {**base, **overrides},
        "seed": base_seed if seed is None else seed,
    }
    if base_mix is not None:
        data["mix"] = base_mix
    return Settings.from_dict(data)


def prior_for(preset, settings, memlimit=None):
    """The prior to start ``settings`` from: the preset's, when the settings run the Mamba
    in the preset's own shape (a prior belongs to its shape); else None."""
    sha = priors.preset_prior(preset)
    if sha is None or (settings.mix is not None and not settings.mix.mamba):
        return None
    if settings.model != resolve_settings(preset).model:
        return None
    return priors.load(sha, memlimit)


def for_header(header, given=None, memlimit=None):
    """The Start of decoding the stream of ``header`` (``container.read_header``) with the
    ``given`` model: the shipped prior the header names when none is given, checked to be
    the model the file was compressed from, given the same way."""
    model, resume = (given.model, given.resume) if given else (None, False)
    sha = header["model_sha256"]
    if model is None and not header["model_resume"] and priors.shipped(sha):
        model = priors.load(sha, memlimit)
    _check_model(header, model, resume)
    return Start(header["settings"], model, resume)


def _check_model(header, model, resume):
    want, want_resume = header["model_sha256"], header["model_resume"]
    flag = "--resume" if want_resume else "--model"
    if want is None:
        if model is not None:
            raise CheckpointError(
                "this file was compressed without a starting model; "
                "decompress it without --model or --resume"
            )
        return
    if model is None and want_resume:
        raise CheckpointError(
            f"this file was compressed starting from a model (SHA-256 {want}); "
            f"give that checkpoint with {flag}"
        )
    if model is None:
        # A header names a prior and a user's --model alike, by SHA-256 only.
        raise CheckpointError(
            f"this file was compressed starting from the model with SHA-256 {want}, which "
            f"this installation does not ship: if it is a prior of another mambazip release, "
            f"install that release; if it is your checkpoint, give it with --model"
        )
    if model.digest() != want:
        raise CheckpointError(
            f"wrong model: this file was compressed starting from SHA-256 {want}, "
            f"the given model has {model.digest()}"
        )
    if resume != want_resume:
        raise CheckpointError(
            f"this file was compressed with {flag} from this checkpoint; give it with {flag}"
        )
