"""Model shape and online-training settings: frozen, validated, serialisable.

A compressed file records a ``Settings`` in its header, so everything that changes the coded
bits lives here and nowhere else.
"""

import dataclasses
import json
import math
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import numpy as np

from .errors import ConfigError
from .kernels.layout import N_DIMS
from .predictor.config import MixConfig

VOCAB = 256
SCOPE_GROUPS = ("embed", "layer_norm", "mixer_conv", "mixer_ssm", "mixer_proj", "head", "bias")
SCOPES = (*SCOPE_GROUPS, "all", "none")
OPTIMIZERS = ("sgd", "adam", "none")
# --mix: the Mamba alone (the format before mixing), the context models alone, or both.
MIX_MODES = ("none", "cm", "full")

# Bounds checked before anything is allocated: a header may not make us reserve gigabytes.
_DIM_LIMITS = {
    "d_model": 4096,
    "n_layer": 64,
    "d_inner": 16384,
    "d_state": 256,
    "d_conv": 16,
    "dt_rank": 1024,
}
# 4M parameters: twice the largest preset (max, 2M), with gradients and two Adam moments
# 64 MB. The bound is on work as much as on memory: a 15M-parameter header (d_model 2 x 32
# layers, d_inner 16384) made the decoder spend over a minute on a 1 KB file (the fuzz of
# scripts/fuzz_mz.py), and a hostile header must not buy that much time per byte.
MAX_PARAMETERS = 1 << 22


@dataclass(frozen=True)
class ModelConfig:
    """Shape of a Mamba-1 byte model (names as in Hugging Face's MambaConfig where they exist)."""

    d_model: int
    n_layer: int
    d_inner: int
    dt_rank: int
    d_state: int = 16
    d_conv: int = 4
    vocab: int = VOCAB
    norm_eps: float = 1e-5
    proj_bias: bool = False
    conv_bias: bool = True
    x_proj_bias: bool = False
    head_bias: bool = False
    tie_embeddings: bool = False

    def __post_init__(self):
        for name, limit in _DIM_LIMITS.items():
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= limit:
                raise ConfigError(f"{name} must be an integer in 1..{limit}, got {value!r}")
        if self.vocab != VOCAB:
            raise ConfigError(f"vocab must be {VOCAB} (bytes), got {self.vocab!r}")
        eps = self.norm_eps
        if not isinstance(eps, float) or not (math.isfinite(eps) and 0.0 < eps < 1.0):
            raise ConfigError(f"norm_eps must be a float in (0, 1), got {eps!r}")
        for name in ("proj_bias", "conv_bias", "x_proj_bias", "head_bias", "tie_embeddings"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{name} must be true or false")
        if self.n_parameters > MAX_PARAMETERS:
            raise ConfigError(
                f"model has {self.n_parameters} parameters, more than the {MAX_PARAMETERS} allowed"
            )

    @property
    def n_parameters(self):
        D, E, N, R, K, L = (
            self.d_model, self.d_inner, self.d_state, self.dt_rank, self.d_conv, self.n_layer,
        )  # fmt: skip
        per_layer = D + 2 * E * D + K * E + E * (R + 2 * N) + R * E + E + 2 * E * N + E * D
        return (2 - self.tie_embeddings) * VOCAB * D + D + L * per_layer

    def dims(self):
        """The int64 ``dims`` array that kernels take (order: layout.DIM_*)."""
        out = np.array(
            [
                self.d_model,
                self.d_inner,
                self.d_state,
                self.dt_rank,
                self.d_conv,
                self.vocab,
                self.n_layer,
                int(self.tie_embeddings),
            ],
            dtype=np.int64,
        )
        assert out.shape[0] == N_DIMS
        return out

    @classmethod
    def create(cls, d_model, n_layer, d_inner=None, dt_rank=None, **rest):
        """Mamba's defaults for the derived sizes: d_inner = 2 d_model, dt_rank = ceil(D/16)."""
        return cls(
            d_model=d_model,
            n_layer=n_layer,
            d_inner=d_inner or 2 * d_model,
            dt_rank=dt_rank or -(-d_model // 16),
            **rest,
        )


# Longest truncated-BPTT segment: its inputs, targets and chunk states are kept in memory.
MAX_BPTT = 1024


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


# The recipe knobs at the values that reproduce the training of the formats before them.
RECIPE_DEFAULTS = {
    "beta2_warmup": False, "lr_scale": (), "horizon": 0, "curriculum": 0, "iters": 1,
    "replay_every": 0, "replay_window": 0, "replay_passes": 1, "rerun": True,
    "overlap": False,
}  # fmt: skip
# A replay holds its window in memory and a pass costs a forward and backward per byte:
# both bounded, so that a header cannot buy unbounded work per byte.
MAX_REPLAY_WINDOW = 1 << 20
MAX_ITERS = 16
MAX_EXTRA_WORK = 256
_RECIPE_BOUNDS = (
    ("horizon", 0, MAX_BPTT), ("curriculum", 0, 1 << 40), ("iters", 1, MAX_ITERS),
    ("replay_every", 0, 1 << 40), ("replay_window", 0, MAX_REPLAY_WINDOW),
    ("replay_passes", 1, MAX_ITERS),
)  # fmt: skip


@dataclass(frozen=True)
class TrainConfig:
    """How the model learns while it codes: one optimizer step per ``bptt`` bytes, on the
    mean loss of the segment with gradients through the recurrent state (bptt=1: one exact
    step per byte, the state held constant). ``warmup`` and ``decay`` count bytes.

    The recipe knobs (RECIPE_DEFAULTS; a header records only those that differ):
    ``beta2_warmup``: Adam's second moment is the plain mean of g^2 until 1 / (1 - beta2)
    steps have passed (beta2_t = min(beta2, 1 - 1/t), no bias correction: the mean has none).
    ``lr_scale``: learning-rate multipliers per SCOPE_GROUPS group; a tensor takes the
    product of its groups' multipliers. ``horizon``: the update every ``bptt`` bytes learns
    its new bytes with the gradient carried back through the state over the last
    ``horizon`` forwards (a multiple of bptt; 0: bptt), as TBPTT(bptt, horizon) does; with
    ``curriculum`` > 0 the horizon starts at bptt and grows by bptt every ``curriculum``
    bytes learned. ``iters``: optimizer steps per update on the same window. Replay: every
    ``replay_every`` bytes learned, ``replay_passes`` passes of truncated BPTT over the last
    ``replay_window`` bytes, from the zero state, without moving the schedule's clock.
    ``rerun``: after its update a segment is run again from its start state with the new
    weights, and the next byte is fed from the state they reach; false: fed from the state
    the forwards already computed with the old weights (the new weights predict from the
    next byte on), which saves a forward per byte. Without a horizon only: a horizon's kept
    forwards are replayed from the states the rerun saves. ``overlap``: each update lands
    one segment late, its gradient taken while the next segment is coded (on a second core
    when there is one; kernels/segment.py): the forwards of segment k + 1 read the weights
    updated through segment k - 1. Without a rerun, a horizon, replay or iters only."""

    optimizer: str = "adam"
    lr: float = 1e-3
    scope: tuple = ("all",)
    clip: float = 0.0
    warmup: int = 0
    decay: int = 0
    beta1: float = 0.9
    beta2: float = 0.999
    adam_eps: float = 1e-8
    bptt: int = 1
    beta2_warmup: bool = False
    lr_scale: tuple = ()
    horizon: int = 0
    curriculum: int = 0
    iters: int = 1
    replay_every: int = 0
    replay_window: int = 0
    replay_passes: int = 1
    rerun: bool = True
    overlap: bool = False

    def __post_init__(self):
        if self.optimizer not in OPTIMIZERS:
            raise ConfigError(f"optimizer must be one of {', '.join(OPTIMIZERS)}")
        scope = tuple(self.scope)
        object.__setattr__(self, "scope", scope)
        unknown = [s for s in scope if s not in SCOPES]
        if unknown or not scope:
            raise ConfigError(f"scope must be a comma list of {', '.join(SCOPES)}")
        for name in ("lr", "clip", "beta1", "beta2", "adam_eps"):
            value = getattr(self, name)
            if not isinstance(value, float) or not math.isfinite(value) or value < 0:
                raise ConfigError(f"{name} must be a finite number >= 0, got {value!r}")
        if not (self.beta1 < 1 and self.beta2 < 1):
            raise ConfigError("beta1 and beta2 must be below 1")
        for name in ("warmup", "decay"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < 1 << 53:
                raise ConfigError(f"{name} must be an integer >= 0, got {value!r}")
        bptt = self.bptt
        if not _is_int(bptt) or not 1 <= bptt <= MAX_BPTT:
            raise ConfigError(f"bptt must be an integer in 1..{MAX_BPTT}, got {bptt!r}")
        for name in ("beta2_warmup", "rerun", "overlap"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{name} must be true or false")
        self._check_lr_scale()
        for name, lo, hi in _RECIPE_BOUNDS:
            value = getattr(self, name)
            if not _is_int(value) or not lo <= value <= hi:
                raise ConfigError(f"{name} must be an integer in {lo}..{hi}, got {value!r}")
        if self.horizon and (self.horizon < bptt or self.horizon % bptt):
            raise ConfigError(f"horizon must be 0 or a multiple of bptt ({bptt}), "
                              f"got {self.horizon}")  # fmt: skip
        if self.horizon == bptt:  # the same training as no horizon: one form in headers
            object.__setattr__(self, "horizon", 0)
        if self.curriculum and self.window == bptt:
            raise ConfigError("curriculum needs a horizon longer than bptt")
        if bool(self.replay_every) != bool(self.replay_window):
            raise ConfigError("replay_every and replay_window go together")
        if self.replay_passes != 1 and not self.replay_every:
            raise ConfigError("replay_passes needs replay_every and replay_window")
        if 0 < self.replay_every < bptt:
            raise ConfigError(f"replay_every must be at least bptt ({bptt}): replays happen "
                              "at updates")  # fmt: skip
        if bptt == 1 and (self.horizon > 1 or self.iters > 1 or self.replay_every):
            raise ConfigError("horizon, iters and replay need bptt > 1")
        if not self.rerun and (bptt == 1 or self.horizon):
            raise ConfigError(
                "rerun false needs bptt > 1 and no horizon (bptt 1 has no "
                "rerun; a horizon replays from the states it saves)"
            )
        if self.overlap and (self.rerun or self.horizon or self.replay_every or self.iters > 1):
            raise ConfigError(
                "overlap needs rerun false and no horizon, replay or iters "
                "(each segment is learned once, after the next has begun)"
            )
        if self.extra_work > MAX_EXTRA_WORK:
            raise ConfigError(f"iters x horizon / bptt + replay_passes x replay_window / "
                              f"replay_every is {self.extra_work:.0f} training bytes per byte, "
                              f"more than the {MAX_EXTRA_WORK} allowed")  # fmt: skip

    def _check_lr_scale(self):
        scale = self.lr_scale
        if isinstance(scale, dict):
            scale = tuple(scale.items())
        if not isinstance(scale, tuple) or not all(
            isinstance(pair, tuple) and len(pair) == 2 for pair in scale
        ):
            raise ConfigError("lr_scale must map scope groups to multipliers")
        checked = {}
        for group, value in scale:
            if group not in SCOPE_GROUPS:
                raise ConfigError(f"lr_scale: {group!r} is not one of {', '.join(SCOPE_GROUPS)}")
            if _is_int(value) and abs(value) <= 1 << 53:
                value = float(value)
            if not isinstance(value, float) or not (math.isfinite(value) and 0 <= value <= 1e3):
                raise ConfigError(f"lr_scale[{group}] must be a number in 0..1000, got {value!r}")
            checked[group] = value
        # Sorted, without the multipliers of 1 that change nothing: one form per recipe.
        canonical = tuple(sorted((g, v) for g, v in checked.items() if v != 1.0))
        object.__setattr__(self, "lr_scale", canonical)

    @property
    def extra_work(self):
        """Bytes trained per byte coded, a bound on the work a header can ask for."""
        work = self.iters * self.window / self.bptt
        if self.replay_every:
            work += self.replay_passes * self.replay_window / self.replay_every
        return work

    @property
    def window(self):
        """The bytes an update learns once the horizon has grown: horizon, or bptt."""
        return self.horizon or self.bptt

    def tensor_lr_scale(self, groups):
        """The learning-rate multiplier of a tensor in ``groups``: product over its groups."""
        out = 1.0
        scale = dict(self.lr_scale)
        for group in groups:
            out *= scale.get(group, 1.0)
        return out

    def to_dict(self):
        """The fields, without the recipe knobs left at RECIPE_DEFAULTS, so that a header
        written before they existed keeps its bytes."""
        out = {**dataclasses.asdict(self), "scope": list(self.scope)}
        for name, default in RECIPE_DEFAULTS.items():
            if out[name] == default:
                del out[name]
        if "lr_scale" in out:
            out["lr_scale"] = dict(self.lr_scale)
        return out

    @property
    def groups(self):
        """The scope as a set of SCOPE_GROUPS."""
        if "all" in self.scope:
            return set(SCOPE_GROUPS)
        return set(self.scope) - {"none"}


@dataclass(frozen=True)
class Settings:
    """Everything that determines the coded bits besides the data: recorded in every header."""

    model: ModelConfig
    train: TrainConfig = field(default_factory=TrainConfig)
    seed: int = 0
    mix: MixConfig = None  # the context-mixing predictor; None: the Mamba alone

    def __post_init__(self):
        if (
            not isinstance(self.seed, int)
            or isinstance(self.seed, bool)
            or not (0 <= self.seed < 1 << 64)
        ):
            raise ConfigError(f"seed must be an integer in 0..2^64-1, got {self.seed!r}")
        if self.mix is not None and not isinstance(self.mix, MixConfig):
            raise ConfigError("mix must be a MixConfig or None")

    def to_dict(self):
        train = self.train.to_dict()
        if train["bptt"] == 1:
            del train["bptt"]  # so that bptt=1 files keep the format-1 header
        out = {"model": dataclasses.asdict(self.model), "train": train, "seed": self.seed}
        if self.mix is not None:
            out["mix"] = self.mix.to_dict()  # absent for the Mamba alone: old headers stay
        return out

    @classmethod
    def from_dict(cls, data):
        """Build from ``to_dict`` output; unknown or mistyped fields raise ConfigError."""
        try:
            model = _build(ModelConfig, data["model"])
            train = _build(TrainConfig, data.get("train", {}))
            mix = data.get("mix")
            mix = None if mix is None else MixConfig.from_dict(mix)
            return cls(model=model, train=train, seed=data.get("seed", 0), mix=mix)
        except (KeyError, TypeError, AttributeError) as exc:
            raise ConfigError(f"invalid settings: {exc}") from None


def _build(cls, values):
    known = {f.name: f.type for f in dataclasses.fields(cls)}
    unknown = set(values) - set(known)
    if unknown:
        raise ConfigError(f"unknown {cls.__name__} field(s): {', '.join(sorted(unknown))}")
    coerced = {}
    for name, value in values.items():
        # An integer too large for a float stays an int, which the field's check refuses.
        if known[name] is float and _is_int(value) and abs(value) <= 1 << 53:
            value = float(value)
        if name == "scope" and isinstance(value, list):
            value = tuple(value)
        coerced[name] = value
    return cls(**coerced)


def models_dir():
    """The presets: installed as package data ``mambazip.models``; in a source checkout that
    is not installed (or shadows the installed copy), the repository's ``models/``."""
    try:
        return resources.files("mambazip.models")
    except ModuleNotFoundError:
        return Path(__file__).resolve().parent.parent / "models"


def preset_names():
    return sorted(
        p.name[: -len(".json")] for p in models_dir().iterdir() if p.name.endswith(".json")
    )


def load_preset(name, keep_prior=False, binary=False):
    """The preset ``models/NAME.json`` as a settings dict (model, train, seed; with
    ``keep_prior`` also "prior", the SHA-256 of its pretrained starting model, and
    "prior_train", the training fields that differ when the Mamba starts from it). With
    ``binary``, its mix takes the preset's "binary_mix" fields: those that differ for an
    input that does not look like text (``priors.looks_like_text``)."""
    if name not in preset_names():
        raise ConfigError(f"unknown preset {name!r}; choose from {', '.join(preset_names())}")
    text = models_dir().joinpath(f"{name}.json").read_text()
    data = json.loads(text)
    data.pop("benchmark", None)
    binary_mix = data.pop("binary_mix", {})
    if binary and "mix" in data:
        data["mix"] = {**data["mix"], **binary_mix}
    if not keep_prior:
        data.pop("prior", None)
        data.pop("prior_train", None)
    return data


def resolve_settings(preset="default", model=None, train=None, seed=None, mix=None,
                     from_prior=False, binary=False):  # fmt: skip
    """A preset with explicit overrides applied (None values are ignored). Changing d_model
    without d_inner or dt_rank derives them anew, as Mamba does. ``mix``: one of MIX_MODES
    (None: the preset's), the preset's mixing tables with or without the Mamba. With
    ``from_prior``, the settings of a Mamba that starts from the preset's prior: its
    "prior_train" fields under the explicit ``train`` ones. With ``binary``, the mix of an
    input that does not look like text (``load_preset``)."""
    data = load_preset(preset, keep_prior=from_prior, binary=binary)
    data.pop("prior", None)
    prior_train = data.pop("prior_train", {})
    if mix is not None:
        if mix not in MIX_MODES:
            raise ConfigError(f"mix must be one of {', '.join(MIX_MODES)}, got {mix!r}")
        if mix == "none":
            data.pop("mix", None)
        else:
            data["mix"] = {**data.get("mix", {}), "mamba": mix == "full"}
    model = {k: v for k, v in (model or {}).items() if v is not None}
    train = {k: v for k, v in (train or {}).items() if v is not None}
    if from_prior:
        train = {**prior_train, **train}
    if "d_model" in model:
        model.setdefault("d_inner", 2 * model["d_model"])
        model.setdefault("dt_rank", -(-model["d_model"] // 16))
    if "rerun" not in train and (train.get("bptt") == 1 or train.get("horizon")):
        # A preset's rerun false (a speed choice) cannot hold with these (TrainConfig): the
        # recipe the user asked for wins, with the rerun it needs.
        train["rerun"] = True
    if "overlap" not in train and (
        train.get("rerun") or train.get("horizon") or train.get("replay_every")
        or train.get("iters", 1) > 1
    ):  # fmt: skip
        # Nor can its overlap: the recipe asked for learns each segment more than once.
        train["overlap"] = False
    data["model"] = {**data["model"], **model}
    data["train"] = {**data.get("train", {}), **train}
    if seed is not None:
        data["seed"] = seed
    return Settings.from_dict(data)
