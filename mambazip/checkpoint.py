"""Checkpoints: a model's weights, optionally its Adam moments and step, in one safetensors file.

Layout of the file we write (it is an ordinary safetensors file):
    weights     float32 under transformers ``MambaForCausalLM`` names and shapes
    moments     ``mambazip.adam_m.<name>`` and ``mambazip.adam_v.<name>`` for each weight,
                same shapes; absent when the model was not trained with Adam
    metadata    ``format: pt`` (transformers refuses files without it),
                ``mambazip.format_version``, ``mambazip.settings`` (model config, training
                settings, seed as JSON), ``mambazip.trainer`` (JSON: optimizer ``step`` for
                Adam's bias correction, bytes ``learned`` for the learning-rate schedule)

We write the bytes ourselves rather than with ``safetensors.numpy.save``: that library emits
the metadata in hash-map order, which changes from process to process, and a checkpoint saved
after compressing must be byte-identical to the one saved after decompressing.

``load`` reads our files, and through ``hf`` transformers and mamba_ssm folders and files.
"""

import dataclasses
import hashlib
import json
import struct

import numpy as np

from . import hf
from .config import ModelConfig, Settings
from .errors import CheckpointError, ConfigError
from .files import atomic_output
from .limits import loads_json
from .model import OnlineLearner
from .params import Params, flat_size

FORMAT_VERSION = 1
MOMENT_PREFIXES = ("mambazip.adam_m.", "mambazip.adam_v.")
_KEY_VERSION = "mambazip.format_version"
_KEY_SETTINGS = "mambazip.settings"
_KEY_TRAINER = "mambazip.trainer"


@dataclasses.dataclass
class Checkpoint:
    """A model to start from. ``settings`` is None for models made elsewhere; ``moments``
    (adam_m, adam_v) flat arrays laid out like ``params.flat``, or None; ``step`` and
    ``learned`` the optimizer's step and the schedule's clock; ``sha256`` of the file(s)
    it was read from (see ``digest``)."""

    config: ModelConfig
    params: Params
    moments: tuple = None
    step: int = 0
    learned: int = 0
    settings: Settings = None
    sha256: str = None
    notices: list = dataclasses.field(default_factory=list)

    @classmethod
    def from_learner(cls, learner):
        """The model ``learner`` has reached, with its optimizer state: what ``save`` writes."""
        settings = learner.settings
        params = Params(settings.model, learner.model.params.flat.copy())
        moments = None
        if settings.train.optimizer == "adam":
            moments = (learner.adam_m.copy(), learner.adam_v.copy())
        return cls(settings.model, params, moments, learner.step, learner.learned, settings)

    def digest(self):
        """The SHA-256 that names this model in a .mz header: of the file(s) it was read
        from or, for one made in memory, of the file that saving it writes."""
        if self.sha256 is None:
            self.sha256 = hashlib.sha256(self.to_bytes()).hexdigest()
        return self.sha256

    def to_bytes(self, extra_tensors=None, extra_metadata=None, dtype="F32"):
        """The file's bytes; ``extra_tensors`` and ``extra_metadata`` (str -> str) are written
        beside ours (the trainer keeps its resume state there) and ignored by ``load``.
        ``dtype`` "F16" stores the weights rounded to half precision (a prior shipped at
        half the size; loading widens them to float32 exactly)."""
        if self.settings is None:
            raise CheckpointError("a checkpoint needs settings to be written")
        tensors = self.params.to_hf()
        if self.moments is not None:
            for prefix, flat in zip(MOMENT_PREFIXES, self.moments, strict=True):
                for name, value in Params(self.config, flat).to_hf().items():
                    tensors[prefix + name] = value
        trainer = {"step": self.step, "learned": self.learned, "moments": self.moments is not None}
        metadata = {
            "format": "pt",
            _KEY_VERSION: str(FORMAT_VERSION),
            _KEY_SETTINGS: _json(self.settings.to_dict()),
            _KEY_TRAINER: _json(trainer),
            **(extra_metadata or {}),
        }
        return safetensors_bytes({**tensors, **(extra_tensors or {})}, metadata, dtype)

    def learner(self, settings, resume, replay_chunk=None):
        """A fresh ``OnlineLearner`` (zero recurrent state, primed) from these weights; with
        ``resume`` also from the moments and step. The checkpoint itself is not modified."""
        params = Params(self.config, self.params.flat.copy())
        if resume:
            return OnlineLearner(settings, params, self.moments, self.step, self.learned,
                                 replay_chunk=replay_chunk)  # fmt: skip
        return OnlineLearner(settings, params, replay_chunk=replay_chunk)


def _json(value):
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


_DTYPES = {"F32": "<f4", "F16": "<f2"}


def safetensors_bytes(tensors, metadata, dtype="F32"):
    """A safetensors file of ``tensors`` stored as ``dtype`` (F32, or F16 rounded to
    nearest even), in sorted name order, and the str->str ``metadata``: the same inputs
    always give the same bytes."""
    header = {"__metadata__": dict(sorted(metadata.items()))}
    numpy_dtype = np.dtype(_DTYPES[dtype])
    offset = 0
    for name in sorted(tensors):
        size = tensors[name].size * numpy_dtype.itemsize
        header[name] = {
            "dtype": dtype,
            "shape": list(tensors[name].shape),
            "data_offsets": [offset, offset + size],
        }
        offset += size
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)  # the format pads the header to 8 bytes with spaces
    body = [
        np.ascontiguousarray(np.asarray(tensors[name], dtype="<f4"), dtype=numpy_dtype).tobytes()
        for name in sorted(tensors)
    ]
    return b"".join([struct.pack("<Q", len(raw)), raw, *body])


def save(path, learner, force=False):
    """Write the learner's model, Adam moments and step to ``path`` (atomically)."""
    data = Checkpoint.from_learner(learner).to_bytes()
    with atomic_output(path, force) as f:
        f.write(data)


def write(path, checkpoint, force=False):
    """Write ``checkpoint`` to ``path`` (atomically) in our format."""
    with atomic_output(path, force) as f:
        f.write(checkpoint.to_bytes())


def load(path, memlimit=None):
    """A ``Checkpoint`` from one of our files, a transformers or mamba_ssm folder, or one
    safetensors or PyTorch file of either. Everything loading allocates (the files' bytes,
    their tensors, the parameters and moments) is taken from one budget of ``memlimit`` bytes
    (None: limits.DEFAULT_MEMLIMIT) before it is allocated; weights and moments must be
    finite (and Adam's second moments not negative)."""
    budget = hf.budget_for(path, memlimit)
    ours = {}

    def config_from_metadata(meta):
        # Ours: the shapes the tensors must have come from the settings, before any is read.
        if _KEY_VERSION not in meta:
            return None
        ours.update(_ours_metadata(path, meta))
        return ours["settings"].model

    weights = hf.load_weights(path, budget=budget, config_from_metadata=config_from_metadata,
                              prefixes=MOMENT_PREFIXES)  # fmt: skip
    if ours:
        return _ours(path, weights, budget, **ours)
    params = _params(path, weights.config, weights.tensors, budget)
    return Checkpoint(weights.config, params, sha256=weights.sha256, notices=weights.notices)


def _params(path, cfg, tensors, budget, prefix="", moment=None):
    names = hf.expected_names(cfg)
    for name in names:
        if prefix + name not in tensors:
            raise CheckpointError(f"{path}: missing tensor {prefix + name}")
    for name in names:
        _check_values(path, prefix + name, tensors[prefix + name], moment)
    budget.take(4 * flat_size(cfg))
    try:
        return Params.from_hf(cfg, {n: tensors[prefix + n] for n in names})
    except ConfigError as exc:
        raise CheckpointError(f"{path}: {exc}") from None


def _check_values(path, name, value, moment):
    """Refuse NaN or infinite values (they would turn every prediction into NaN and code the
    data at the coder's floor), and negative Adam second moments (their square root is NaN)."""
    finite = np.isfinite(value)
    if not finite.all():
        bad = np.asarray(value).flat[int(np.argmin(finite.reshape(-1)))]
        raise CheckpointError(
            f"{path}: tensor {name} holds {int(finite.size - finite.sum())} non-finite "
            f"value(s) (first: {bad}); refusing a model with NaN or infinite weights"
        )
    if moment == "v" and (np.asarray(value) < 0).any():
        raise CheckpointError(
            f"{path}: tensor {name} holds negative values; Adam's second moments are >= 0"
        )


def _ours_metadata(path, meta):
    """settings, step, learned and has_moments of our checkpoint's metadata ``meta``."""
    version = meta[_KEY_VERSION]
    if version != str(FORMAT_VERSION):
        raise CheckpointError(
            f"{path}: checkpoint format version {_short(version)}; this mambazip reads version "
            f"{FORMAT_VERSION} (upgrade mambazip if the file is newer)"
        )

    def malformed(message):
        return CheckpointError(f"{path}: malformed checkpoint metadata ({message})")

    try:
        settings_json = loads_json(meta[_KEY_SETTINGS], _KEY_SETTINGS, error=malformed)
        trainer = loads_json(meta[_KEY_TRAINER], _KEY_TRAINER, error=malformed)
        if not isinstance(settings_json, dict) or not isinstance(trainer, dict):
            raise malformed(f"{_KEY_SETTINGS} and {_KEY_TRAINER} must be JSON objects")
        settings = Settings.from_dict(settings_json)
        step, learned, has_moments = trainer["step"], trainer["learned"], trainer["moments"]
    except (KeyError, ValueError, TypeError, ConfigError) as exc:
        raise malformed(_one_line(exc)) from None
    for name, value in (("step", step), ("learned", learned)):
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < 1 << 62:
            raise malformed(f"{name} {_short(value)}")
    if not isinstance(has_moments, bool):
        raise malformed(f"moments {_short(has_moments)}, expected true or false")
    return {"settings": settings, "step": step, "learned": learned, "has_moments": has_moments}


def _ours(path, weights, budget, settings, step, learned, has_moments):
    cfg = settings.model
    params = _params(path, cfg, weights.tensors, budget)
    moments = None
    if has_moments:
        moments = tuple(
            _params(path, cfg, weights.tensors, budget, prefix, moment).flat
            for prefix, moment in zip(MOMENT_PREFIXES, "mv", strict=True)
        )
    return Checkpoint(
        cfg, params, moments, step, learned, settings, weights.sha256, weights.notices
    )


def _short(value):
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _one_line(exc):
    text = " ".join(str(exc).split())
    return text if len(text) <= 200 else text[:197] + "..."
