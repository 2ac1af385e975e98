"""A Mamba-1 byte model with its recurrent state, and the online learner that wraps it.

``Model`` is the network: parameters, recurrent state, saved activations; ``forward`` feeds a
byte, ``gradient`` differentiates the last forward. ``OnlineLearner`` adds the optimizer and
runs the per-byte loop of DESIGN.md in compiled chunks, handing out quantized pdfs.
"""

import numpy as np

from .kernels.forward import acts_size, acts_views
from .kernels.layout import N_TENSORS
from .kernels.step import (
    C_POS,
    C_STEP,
    H_ADAM_EPS,
    H_BETA1,
    H_BETA2,
    H_CLIP,
    H_DECAY,
    H_EPS,
    H_LR,
    H_OPTIMIZER,
    H_WARMUP,
    N_COUNTERS,
    N_HYPER,
    OPT_ADAM,
    OPT_NONE,
    OPT_SGD,
    backward_byte,
    forward_byte,
    quantize,
    run_bytes,
)
from .params import Params, init_params

f32 = np.float32
_OPTIMIZER_CODES = {"none": OPT_NONE, "sgd": OPT_SGD, "adam": OPT_ADAM}


class Model:
    """Parameters + recurrent state (conv ring buffer, SSM state) + activations of the last
    forward. Starts from the zero state."""

    def __init__(self, cfg, params):
        self.cfg = cfg
        self.params = params
        self.dims = cfg.dims()
        self.hyper = np.zeros(N_HYPER, dtype=np.float64)
        self.hyper[H_EPS] = cfg.norm_eps
        L, K, E, N = cfg.n_layer, cfg.d_conv, cfg.d_inner, cfg.d_state
        self.conv_state = np.zeros((L, K, E), dtype=f32)
        self.ssm_state = np.zeros((L, E, N), dtype=f32)
        self.counters = np.zeros(N_COUNTERS, dtype=np.int64)
        self.counters[C_POS] = K - 1  # so that the first input lands in slot 0
        self.work = np.zeros(acts_size(self.dims), dtype=f32)
        self.acts = acts_views(self.work, self.dims)

    @property
    def probs(self):
        """float32 (V,): the pdf of the next byte after the last forward."""
        return self.acts.probs

    @property
    def logits(self):
        return self.acts.logits

    def forward(self, byte):
        """Feed one byte; returns a copy of the next byte's pdf."""
        forward_byte(
            self.params.flat, self.params.offsets, self.dims, self.hyper,
            self.conv_state, self.ssm_state, self.counters, self.work, int(byte),
        )  # fmt: skip
        return self.probs.copy()

    def gradient(self, target):
        """Gradient of -log p(target) of the last forward w.r.t. every parameter, the state
        before that forward held constant; HF names and shapes, float32."""
        grad = np.zeros_like(self.params.flat)
        need = np.ones(N_TENSORS, dtype=np.bool_)
        backward_byte(
            self.params.flat, grad, self.params.offsets, need, self.dims,
            self.conv_state, self.ssm_state, self.counters, self.work, int(target),
        )  # fmt: skip
        return Params(self.cfg, grad).to_hf()

    def state_hf(self):
        """(conv (L, E, K) with [..., K-1] the newest input, ssm (L, E, N)) float32 copies."""
        K = self.cfg.d_conv
        pos = int(self.counters[C_POS])
        order = [(pos + 1 + k) % K for k in range(K)]
        conv = np.ascontiguousarray(self.conv_state[:, order, :].transpose(0, 2, 1))
        return conv, self.ssm_state.copy()


class OnlineLearner:
    """The per-byte loop: code b with the current pdf, learn b, feed b, next pdf.

    ``freq`` (V,) int32 always holds the quantized pdf of the next byte. ``advance`` runs the
    loop over a chunk in one compiled call.
    """

    def __init__(self, settings, params=None, moments=None, step=0):
        """Start from ``params`` (default: the seeded init) and, to resume training,
        ``moments`` = (adam_m, adam_v) flat float32 arrays and the optimizer ``step``."""
        cfg, train = settings.model, settings.train
        self.settings = settings
        self.model = Model(cfg, params if params is not None else init_params(cfg, settings.seed))
        flat = self.model.params.flat
        self.grad = np.zeros_like(flat)
        if moments is None:
            self.adam_m = np.zeros_like(flat)
            self.adam_v = np.zeros_like(flat)
        else:
            self.adam_m, self.adam_v = (np.array(m, dtype=f32, copy=True) for m in moments)
        self.model.counters[C_STEP] = step
        groups = train.groups if train.optimizer != "none" else set()
        self.segments = self.model.params.segments(groups)
        self.need = self.model.params.need_mask(groups)
        hyper = self.model.hyper
        hyper[H_LR] = train.lr
        hyper[H_BETA1] = train.beta1
        hyper[H_BETA2] = train.beta2
        hyper[H_ADAM_EPS] = train.adam_eps
        hyper[H_CLIP] = train.clip
        hyper[H_WARMUP] = train.warmup
        hyper[H_DECAY] = train.decay
        hyper[H_OPTIMIZER] = _OPTIMIZER_CODES[train.optimizer]
        self.freq = np.zeros(cfg.vocab, dtype=np.int32)
        self.model.forward(0)  # priming: the first byte is predicted after a fixed 0
        quantize(self.freq, self.model.probs)

    def advance(self, data):
        """Run the loop over ``data`` (uint8 array). Returns (freqs, p): freqs (n, V) int32,
        row i the quantized pdf byte i was coded with; p (n,) float32, the float probability
        the model gave byte i. Afterwards ``freq`` is the pdf of the byte after ``data``."""
        n = data.shape[0]
        freqs = np.empty((n + 1, self.freq.shape[0]), dtype=np.int32)
        freqs[0] = self.freq
        p = np.empty(n, dtype=f32)
        m = self.model
        run_bytes(
            m.params.flat, self.grad, self.adam_m, self.adam_v, m.params.offsets, self.need,
            self.segments, m.dims, m.hyper, m.conv_state, m.ssm_state, m.counters, m.work,
            data, freqs, p,
        )  # fmt: skip
        self.freq = freqs[n].copy()
        return freqs[:n], p

    @property
    def step(self):
        """Optimizer steps taken so far: the schedule's position and Adam's bias correction."""
        return int(self.model.counters[C_STEP])

    def finish(self):
        """End of the stream: apply any learning still pending, so that the model both sides
        end in (and may save) has learned every byte."""
