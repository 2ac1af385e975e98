"""Parameters in one flat float32 buffer with named views, and their deterministic init.

``tensor_table(cfg)`` is the single list of tensors: our name and layout, the Hugging Face
``MambaForCausalLM`` name, the training-scope groups, and how to initialise it. Saving,
loading, converting and choosing what to train are loops over that table.
"""

from collections import namedtuple

import numpy as np

from .errors import ConfigError
from .jit import jit
from .kernels import layout as lay
from .kernels.detmath import exp32, log32

f32 = np.float32
ALIGN = 16  # floats: each tensor starts on a 64-byte boundary

Tensor = namedtuple(
    "Tensor",
    ["index", "name", "shape", "hf_name", "hf_layout", "groups", "present", "init"],
)
# hf_layout: how one (per-layer) slice of ours maps to the HF tensor:
#   "t" transpose (our input-major matrices), "conv" (K, E) <-> (E, 1, K), "same".
# init: ("uniform", bound) | ("const", value) | ("a_log",) | ("dt_bias",)


def tensor_table(cfg):
    D, E, N, R, K, L, V = (
        cfg.d_model, cfg.d_inner, cfg.d_state, cfg.dt_rank, cfg.d_conv, cfg.n_layer, cfg.vocab,
    )  # fmt: skip
    P = R + 2 * N
    layer = "backbone.layers.{i}."
    mixer = layer + "mixer."
    # Mamba's init: PyTorch Linear/Conv defaults (uniform, bound 1/sqrt(fan_in)), out_proj
    # rescaled by 1/sqrt(n_layer), dt_proj bound dt_rank^-1/2, S4D-real A, D = 1.
    return [
        Tensor(lay.EMBEDDING, "embedding", (D, V), "backbone.embeddings.weight", "t",
               ("embed", "head") if cfg.tie_embeddings else ("embed",), True,
               ("uniform", 0.1 * 3**0.5)),
        Tensor(lay.NORM, "norm", (L, D), layer + "norm.weight", "same",
               ("layer_norm",), True, ("const", 1.0)),
        Tensor(lay.IN_PROJ, "in_proj", (L, D, 2 * E), mixer + "in_proj.weight", "t",
               ("mixer_proj",), True, ("uniform", D**-0.5)),
        Tensor(lay.IN_PROJ_BIAS, "in_proj_bias", (L, 2 * E), mixer + "in_proj.bias", "same",
               ("mixer_proj", "bias"), cfg.proj_bias, ("const", 0.0)),
        Tensor(lay.CONV_W, "conv_w", (L, K, E), mixer + "conv1d.weight", "conv",
               ("mixer_conv",), True, ("uniform", K**-0.5)),
        Tensor(lay.CONV_B, "conv_b", (L, E), mixer + "conv1d.bias", "same",
               ("mixer_conv", "bias"), cfg.conv_bias, ("uniform", K**-0.5)),
        Tensor(lay.X_PROJ, "x_proj", (L, E, P), mixer + "x_proj.weight", "t",
               ("mixer_ssm",), True, ("uniform", E**-0.5)),
        Tensor(lay.X_PROJ_BIAS, "x_proj_bias", (L, P), mixer + "x_proj.bias", "same",
               ("mixer_ssm", "bias"), cfg.x_proj_bias, ("const", 0.0)),
        Tensor(lay.DT_PROJ, "dt_proj", (L, R, E), mixer + "dt_proj.weight", "t",
               ("mixer_ssm",), True, ("uniform", R**-0.5)),
        Tensor(lay.DT_BIAS, "dt_bias", (L, E), mixer + "dt_proj.bias", "same",
               ("mixer_ssm", "bias"), True, ("dt_bias",)),
        Tensor(lay.A_LOG, "A_log", (L, E, N), mixer + "A_log", "same",
               ("mixer_ssm",), True, ("a_log",)),
        Tensor(lay.D_SKIP, "D", (L, E), mixer + "D", "same",
               ("mixer_ssm",), True, ("const", 1.0)),
        Tensor(lay.OUT_PROJ, "out_proj", (L, E, D), mixer + "out_proj.weight", "t",
               ("mixer_proj",), True, ("uniform", E**-0.5 / L**0.5)),
        Tensor(lay.OUT_PROJ_BIAS, "out_proj_bias", (L, D), mixer + "out_proj.bias", "same",
               ("mixer_proj", "bias"), cfg.proj_bias, ("const", 0.0)),
        Tensor(lay.NORM_F, "norm_f", (D,), "backbone.norm_f.weight", "same",
               ("layer_norm",), True, ("const", 1.0)),
        Tensor(lay.LM_HEAD, "lm_head", (D, V), "lm_head.weight", "t",
               ("head",), not cfg.tie_embeddings, ("uniform", D**-0.5)),
        Tensor(lay.LM_HEAD_BIAS, "lm_head_bias", (V,), "lm_head.bias", "same",
               ("head", "bias"), cfg.head_bias, ("const", 0.0)),
    ]  # fmt: skip


def _offsets(table):
    """Start of each tensor in the flat buffer. Absent optional tensors keep their (zero)
    slot, so kernels add a bias unconditionally and need no branch per layout variant."""
    offs = np.zeros(lay.N_TENSORS, dtype=np.int64)
    at = 0
    for t in table:
        offs[t.index] = at
        at += -(-int(np.prod(t.shape)) // ALIGN) * ALIGN
    return offs, at


def flat_size(cfg):
    """Floats in the flat buffer of a model of ``cfg`` (what ``Params(cfg)`` allocates)."""
    return int(_offsets(tensor_table(cfg))[1])


@jit
def _splitmix64(state):
    state[0] += np.uint64(0x9E3779B97F4A7C15)
    z = state[0]
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@jit
def _fill_uniform(out, state, bound):
    """out[:] ~ U(-bound, bound) from the top 24 bits of splitmix64 draws."""
    scale = f32(2.0 * bound / 16777216.0)
    for i in range(out.size):
        top = _splitmix64(state) >> np.uint64(40)
        out.flat[i] = f32(np.int64(top) - 8388608) * scale


@jit
def _fill_dt_bias(out, state, dt_min, dt_max):
    """Mamba's dt init: dt log-uniform in [dt_min, dt_max], bias = softplus^-1(dt)."""
    log_min = log32(dt_min)
    log_max = log32(dt_max)
    for i in range(out.size):
        u = f32(np.int64(_splitmix64(state) >> np.uint64(40))) * f32(1.0 / 16777216.0)
        dt = exp32(log_min + u * (log_max - log_min))
        dt = max(dt, f32(1e-4))
        out.flat[i] = dt + log32(f32(1.0) - exp32(-dt))


@jit
def _fill_a_log(out):
    """S4D-real: A_log[..., n] = log(n + 1), out (..., N)."""
    N = out.shape[-1]
    flat = out.reshape(-1)
    for i in range(flat.size):
        flat[i] = log32(f32(i % N + 1))


class Params:
    """A model's parameters: ``flat`` float32 and a view per tensor (``params["in_proj"]``)."""

    def __init__(self, cfg, flat=None):
        self.cfg = cfg
        self.table = tensor_table(cfg)
        self.offsets, size = _offsets(self.table)
        self.flat = np.zeros(size, dtype=f32) if flat is None else flat
        if self.flat.shape != (size,) or self.flat.dtype != f32:
            raise ConfigError("flat parameter buffer does not match the model config")
        self.views = {t.name: self.view_of(self.flat, t) for t in self.table if t.present}

    def view_of(self, buffer, tensor):
        """The view of ``tensor`` in any buffer laid out like ``flat`` (gradients, moments)."""
        start = self.offsets[tensor.index]
        return buffer[start : start + int(np.prod(tensor.shape))].reshape(tensor.shape)

    def __getitem__(self, name):
        return self.views[name]

    def trainable_ranges(self, groups):
        """(S, 2) int64 [start, stop) ranges of the present tensors in any of ``groups``."""
        rows = [
            (self.offsets[t.index], self.offsets[t.index] + int(np.prod(t.shape)))
            for t in self.table
            if t.present and set(t.groups) & set(groups)
        ]
        return np.array(rows, dtype=np.int64).reshape(-1, 2)

    def range_lr_scales(self, groups, train):
        """(S,) float32: the learning-rate multiplier (``TrainConfig.tensor_lr_scale``) of
        each of ``trainable_ranges(groups)``, in the same order."""
        scales = [
            train.tensor_lr_scale(t.groups)
            for t in self.table
            if t.present and set(t.groups) & set(groups)
        ]
        return np.array(scales, dtype=np.float32)

    def need_mask(self, groups):
        """(N_TENSORS,) bool: which weight gradients the backward pass must form."""
        need = np.zeros(lay.N_TENSORS, dtype=np.bool_)
        for t in self.table:
            need[t.index] = t.present and bool(set(t.groups) & set(groups))
        if self.cfg.tie_embeddings:
            need[lay.LM_HEAD] = need[lay.EMBEDDING]
        return need

    def to_hf(self):
        """Float32 copies under Hugging Face MambaForCausalLM names and shapes."""
        out = {}
        for t in self.table:
            if not t.present:
                continue
            view = self.views[t.name]
            if t.hf_name.startswith("backbone.layers."):
                for i in range(self.cfg.n_layer):
                    out[t.hf_name.format(i=i)] = _to_hf(view[i], t.hf_layout)
            else:
                out[t.hf_name] = _to_hf(view, t.hf_layout)
        return out

    @classmethod
    def from_hf(cls, cfg, tensors):
        """Build from a dict of Hugging Face named tensors (any float dtype)."""
        params = cls(cfg)
        for t in params.table:
            if not t.present:
                continue
            view = params.views[t.name]
            if t.hf_name.startswith("backbone.layers."):
                for i in range(cfg.n_layer):
                    name = t.hf_name.format(i=i)
                    view[i] = _from_hf(name, tensors[name], t.hf_layout, view.shape[1:])
            else:
                view[...] = _from_hf(t.hf_name, tensors[t.hf_name], t.hf_layout, view.shape)
        return params


def _to_hf(ours, hf_layout):
    if hf_layout == "t":
        return np.ascontiguousarray(ours.T)
    if hf_layout == "conv":
        return np.ascontiguousarray(ours.T[:, None, :])
    return ours.copy()


def _from_hf(name, theirs, hf_layout, our_shape):
    theirs = np.asarray(theirs, dtype=f32)
    expected = _to_hf(np.empty(our_shape, dtype=f32), hf_layout).shape
    if theirs.shape != expected:
        raise ConfigError(f"tensor {name} has shape {theirs.shape}, expected {expected}")
    if hf_layout == "t":
        return theirs.T
    if hf_layout == "conv":
        return theirs[:, 0, :].T
    return theirs


def init_params(cfg, seed):
    """Mamba-style initialisation, bit-identical on every machine for a given seed."""
    params = Params(cfg)
    state = np.array([seed], dtype=np.uint64)
    for t in params.table:
        if not t.present:
            continue
        view = params.views[t.name]
        kind = t.init[0]
        if kind == "uniform":
            _fill_uniform(view, state, t.init[1])
        elif kind == "const":
            view[...] = t.init[1]
        elif kind == "a_log":
            _fill_a_log(view)
        else:
            _fill_dt_bias(view, state, f32(0.001), f32(0.1))
    return params
