"""A Mamba-1 byte model with its recurrent state, and the online learner that wraps it.

``Model`` is the network: parameters, recurrent state, saved activations; ``forward`` feeds a
byte, ``gradient`` differentiates the last forward. ``OnlineLearner`` adds the optimizer and
runs the per-byte loop of DESIGN.md in compiled chunks, handing out quantized pdfs.
"""

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .kernels.forward import a_from_log, acts_size, acts_views_py
from .kernels.layout import N_TENSORS, weight_views_py
from .kernels.segment import (
    N_PLAN,
    P_BPTT,
    P_CHUNK,
    P_CURRICULUM,
    P_HISTORY,
    P_ITERS,
    P_OVERLAP,
    P_REPLAY_EVERY,
    P_REPLAY_PASSES,
    P_RERUN,
    P_WINDOW,
    overlap_update,
    run_segments,
    segment_backward,
    segment_forward,
    segment_sizes,
    segment_update,
    segment_views_py,
)
from .kernels.step import (
    C_BYTES,
    C_LAST_INPUT,
    C_POS,
    C_SEG,
    C_STEP,
    H_ADAM_EPS,
    H_BETA1,
    H_BETA2,
    H_BETA2_WARMUP,
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
    backward_tokens,
    forward_byte,
    quantize,
    run_bytes,
)
from .params import Params, init_params

f32 = np.float32
# Default memory for a segment's saved activations; a longer segment is replayed in chunks.
SEGMENT_MEMORY = 256 << 20
_OPTIMIZER_CODES = {"none": OPT_NONE, "sgd": OPT_SGD, "adam": OPT_ADAM}


def update_thread_default():
    """Whether an overlapped update runs on a thread of its own: when this process may use
    more than one core. Either way the bits are the same."""
    return len(os.sched_getaffinity(0)) > 1


def replay_chunk_for(dims, bptt, replay_chunk=None, divides=False):
    """Forwards of a truncated-BPTT segment whose activations are kept: ``replay_chunk``, by
    default as many as SEGMENT_MEMORY holds, at most the stride ``bptt``; with ``divides`` a
    divisor of it (a horizon's oldest chunks are dropped a stride at a time)."""
    if replay_chunk is None:
        replay_chunk = SEGMENT_MEMORY // (4 * acts_size(dims))
    chunk = max(1, min(replay_chunk, bptt))
    while divides and bptt % chunk:
        chunk -= 1
    return chunk


def segment_shapes(dims, train, replay_chunk=None):
    """((capacity, chunk, history), replay shape or None): the truncated-BPTT segment of
    ``train`` and the one its replay passes use (``segment_sizes`` arguments)."""
    chunk = replay_chunk_for(dims, train.bptt, replay_chunk, divides=train.window > train.bptt)
    live = (train.window, chunk, train.replay_window)
    return live, ((train.bptt, chunk, 0) if train.replay_every else None)


class Model:
    """Parameters + recurrent state (conv ring buffer, SSM state) + activations of the last
    forward. Starts from the zero state. ``A`` = -exp(A_log) is formed here once, then by the
    optimizer after each update: the parameters must change only there (edit them in place
    and ``A`` goes stale; build a new Model instead)."""

    def __init__(self, cfg, params):
        self.cfg = cfg
        self.params = params
        self.dims = cfg.dims()
        self.hyper = np.zeros(N_HYPER, dtype=np.float64)
        self.hyper[H_EPS] = cfg.norm_eps
        L, K, E, N = cfg.n_layer, cfg.d_conv, cfg.d_inner, cfg.d_state
        self.conv_state = np.zeros((L, K, E), dtype=f32)
        self.ssm_state = np.zeros((L, E, N), dtype=f32)
        self.A = np.empty((L, E, N), dtype=f32)
        a_from_log(self.A, weight_views_py(params.flat, params.offsets, self.dims).A_log)
        self.counters = np.zeros(N_COUNTERS, dtype=np.int64)
        self.counters[C_POS] = K - 1  # so that the first input lands in slot 0
        self.work = np.zeros(acts_size(self.dims), dtype=f32)
        self.acts = acts_views_py(self.work, self.dims)
        # bptt=1 scratch: the state gradients and deferred terms of a one-token segment.
        one = self.new_segment(1, 1)[0]
        self.dssm, self.dpend, self.dfr = one.dssm, one.dpend, one.dfr
        self.token = np.zeros(2, dtype=np.int64)

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
            self.params.flat, self.A, self.params.offsets, self.dims, self.hyper,
            self.conv_state, self.ssm_state, self.counters, self.work, int(byte),
        )  # fmt: skip
        return self.probs.copy()

    def gradient(self, target):
        """Gradient of -log p(target) of the last forward w.r.t. every parameter, the state
        before that forward held constant; HF names and shapes, float32."""
        grad = np.zeros_like(self.params.flat)
        need = np.ones(N_TENSORS, dtype=np.bool_)
        backward_tokens(
            self.params.flat, self.A, grad, self.params.offsets, need, self.dims,
            self.work.reshape(1, -1), self.counters[C_LAST_INPUT : C_LAST_INPUT + 1],
            np.array([target], dtype=np.int64), f32(1.0), False, self.dssm, self.dpend, self.dfr,
        )  # fmt: skip
        return Params(self.cfg, grad).to_hf()

    def new_segment(self, bptt, chunk, history=0):
        """Empty truncated-BPTT buffers for segments of ``bptt`` forwards, replayed in chunks
        of ``chunk``, with ``history`` bytes of replay history (see kernels.segment):
        (Segment views, their int64 and float32 buffers)."""
        n_ints, n_floats = segment_sizes(self.dims, bptt, chunk, history)
        ints = np.zeros(n_ints, dtype=np.int64)
        floats = np.zeros(n_floats, dtype=f32)
        return segment_views_py(ints, floats, self.dims, bptt, chunk, history), ints, floats

    def segment_gradient(self, inputs, targets, chunk=None):
        """Gradient of the mean of -log p(targets[t]) over forwards of ``inputs`` from the
        current state, carried back through the state across the whole segment (truncated
        BPTT), activations replayed in chunks of ``chunk``; a target of -1 has no loss (its
        forward is only a path for the gradient). HF names and shapes, float32. The state
        is left as it was."""
        n = len(inputs)
        seg = self.new_segment(n, chunk or n)[0]
        saved = self.conv_state.copy(), self.ssm_state.copy(), self.counters.copy()
        self.counters[C_SEG] = 0
        for byte in inputs:
            segment_forward(
                self.params.flat, self.A, self.params.offsets, self.dims, self.hyper,
                self.conv_state, self.ssm_state, self.counters, seg, int(byte),
            )  # fmt: skip
        seg.targets[:] = targets
        grad = np.zeros_like(self.params.flat)
        segment_backward(
            self.params.flat, self.A, grad, self.params.offsets,
            np.ones(N_TENSORS, dtype=np.bool_),
            self.dims, self.hyper, self.conv_state, self.ssm_state, self.counters, seg, n,
            sum(1 for t in targets if t >= 0), True,
        )  # fmt: skip
        self.conv_state[...], self.ssm_state[...], self.counters[...] = saved
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

    def __init__(self, settings, params=None, moments=None, step=0, learned=0, replay_chunk=None,
                 thread=None):  # fmt: skip
        """Start from ``params`` (default: the seeded init) and, to resume training,
        ``moments`` = (adam_m, adam_v) flat float32 arrays, the optimizer ``step`` and the
        bytes ``learned`` (the schedule's clock). ``replay_chunk`` bounds the truncated-BPTT
        activations kept in memory (default: all of a segment, up to SEGMENT_MEMORY);
        ``thread`` whether overlapped updates (``train.overlap``) run on a thread of their
        own (default: ``update_thread_default``). Neither changes a bit of the result."""
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
        self.model.counters[C_BYTES] = learned
        groups = train.groups if train.optimizer != "none" else set()
        self.ranges = self.model.params.trainable_ranges(groups)
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
        hyper[H_BETA2_WARMUP] = train.beta2_warmup
        self.lrs = self.model.params.range_lr_scales(groups, train)
        self.freq = np.zeros(cfg.vocab, dtype=np.int32)
        self._byte = np.zeros(1, dtype=np.uint8)
        self._byte_freqs = np.zeros((2, cfg.vocab), dtype=np.int32)
        self._byte_pdfs = np.zeros((2, cfg.vocab), dtype=f32)
        self._byte_p = np.zeros(1, dtype=f32)
        self._no_freqs = np.zeros((0, cfg.vocab), dtype=np.int32)
        self._no_pdfs = np.zeros((0, cfg.vocab), dtype=f32)
        learns = train.optimizer != "none" and self.ranges.shape[0] > 0
        self.seg = None
        if learns and train.bptt > 1:
            self._seg_shape, replay_shape = segment_shapes(self.model.dims, train, replay_chunk)
            self.seg, self._seg_ints, self._seg_floats = self.model.new_segment(*self._seg_shape)
            self._rep_ints = np.zeros(0, dtype=np.int64)
            self._rep_floats = np.zeros(0, dtype=f32)
            if replay_shape is not None:
                _, self._rep_ints, self._rep_floats = self.model.new_segment(*replay_shape)
            self.plan = np.zeros(N_PLAN, dtype=np.int64)
            self.plan[P_BPTT] = train.bptt
            self.plan[P_WINDOW] = train.window
            self.plan[P_CHUNK] = self._seg_shape[1]
            self.plan[P_HISTORY] = train.replay_window
            self.plan[P_CURRICULUM] = train.curriculum
            self.plan[P_ITERS] = train.iters
            self.plan[P_REPLAY_EVERY] = train.replay_every
            self.plan[P_REPLAY_PASSES] = train.replay_passes
            self.plan[P_RERUN] = train.rerun
            self.plan[P_OVERLAP] = train.overlap
        self._overlap = None
        if self.seg is not None and train.overlap:
            self._overlap = _Overlap(self, update_thread_default() if thread is None else thread)
        # Priming: the first byte is predicted after a fixed 0.
        self._forward(0)
        quantize(self.freq, self._probs())
        self.pdf = self._probs().copy()

    def _forward(self, byte):
        m = self.model
        if self.seg is None:
            m.forward(byte)
            return
        segment_forward(
            m.params.flat, m.A, m.params.offsets, m.dims, m.hyper, m.conv_state, m.ssm_state,
            m.counters, self.seg, byte,
        )  # fmt: skip

    def _probs(self):
        if self.seg is None:
            return self.model.probs
        newest = (self.model.counters[C_SEG] - 1) % self.seg.work.shape[0]
        return acts_views_py(self.seg.work[newest], self.model.dims).probs

    def advance(self, data):
        """Run the loop over ``data`` (uint8 array). Returns (freqs, p): freqs (n, V) int32,
        row i the quantized pdf byte i was coded with; p (n,) float32, the float probability
        the model gave byte i. Afterwards ``freq`` is the pdf of the byte after ``data``."""
        n = data.shape[0]
        freqs = np.empty((n + 1, self.freq.shape[0]), dtype=np.int32)
        freqs[0] = self.freq
        p = np.empty(n, dtype=f32)
        self._run(data, freqs, self._no_pdfs, p)
        self.freq = freqs[n].copy()
        return freqs[:n], p

    def advance_pdfs(self, data):
        """``advance`` for a predictor that mixes the model's pdfs with other parts: returns
        (pdfs, p), pdfs (n, V) float32 with row i the pdf of the byte after data[i]. Only
        ``pdf`` is kept up to date (``freq`` goes stale)."""
        n = data.shape[0]
        pdfs = np.empty((n + 1, self.freq.shape[0]), dtype=f32)
        p = np.empty(n, dtype=f32)
        self._run(data, self._no_freqs, pdfs, p)
        self.pdf = pdfs[n]
        return pdfs[1:], p

    def advance_byte(self, byte):
        """``advance`` over the one byte ``byte``, as the decoder calls it, without the
        allocations: only ``freq`` is updated, to a view valid until the next call."""
        self._byte[0] = byte
        self._run(self._byte, self._byte_freqs, self._no_pdfs, self._byte_p)
        self.freq = self._byte_freqs[1]

    def advance_byte_pdf(self, byte):
        """``advance_pdfs`` over one byte without allocations: ``pdf`` becomes a view of the
        next byte's pdf, valid until the next call."""
        self._byte[0] = byte
        self._run(self._byte, self._no_freqs, self._byte_pdfs, self._byte_p)
        self.pdf = self._byte_pdfs[1]

    def _run(self, data, freqs, pdfs, p):
        m = self.model
        if self._overlap is not None:
            self._overlap.run(self, data, freqs, pdfs, p)
        elif self.seg is None:
            run_bytes(
                m.params.flat, m.A, self.grad, self.adam_m, self.adam_v, m.params.offsets,
                self.need, self.ranges, self.lrs, m.dims, m.hyper, m.conv_state, m.ssm_state,
                m.counters, m.work, m.dssm, m.dpend, m.dfr, m.token, data, freqs, pdfs, p,
            )  # fmt: skip
        else:
            run_segments(
                m.params.flat, m.A, self.grad, self.adam_m, self.adam_v, m.params.offsets,
                self.need, self.ranges, self.lrs, m.dims, m.hyper, m.conv_state, m.ssm_state,
                m.counters, self._seg_ints, self._seg_floats, self._rep_ints, self._rep_floats,
                self.plan, data, freqs, pdfs, p, 0, False,
            )  # fmt: skip

    @property
    def step(self):
        """Optimizer steps taken so far: Adam's bias correction."""
        return int(self.model.counters[C_STEP])

    @property
    def learned(self):
        """Bytes learned so far: the learning-rate schedule's clock."""
        return int(self.model.counters[C_BYTES])

    def settle(self):
        """End of a stream whose model may be dropped: land the overlapped update in flight
        and end its thread. A learner dropped with its update still running would keep the
        buffers that update reads (weights, moments, a segment) until it is done, beside the
        next frame's learner; ``finish`` still learns the unfinished segment after this."""
        if self._overlap is not None:
            self._overlap.settle()

    def finish(self):
        """End of the stream: learn the targets of the unfinished segment, so that the model
        both sides end in (and may save) has learned every byte."""
        m = self.model
        if self._overlap is not None:
            self._overlap.finish(self)
            return
        if self.seg is None:
            return
        known = int(m.counters[C_SEG]) - 1
        if known <= 0:  # nothing to learn, also after a finish
            return
        new = known % self.settings.train.bptt  # the forwards before them were learned
        if new == 0:
            return
        segment_update(
            m.params.flat, m.A, self.grad, self.adam_m, self.adam_v, m.params.offsets, self.need,
            self.ranges, self.lrs, m.dims, m.hyper, m.conv_state, m.ssm_state, m.counters,
            self.seg, known, False, new, True, self.settings.train.iters,
            self.settings.train.rerun,
        )  # fmt: skip


class _Overlap:
    """The two weight buffers and two segments of overlapped updates (kernels/segment.py)
    and the update in flight. T[0] is the model's own ``params.flat``, so that after
    ``finish`` the model holds the newest weights. ``turn`` k counts the segments begun:
    the forwards read T[k % 2] and feed segs[k % 2]. The learner is passed to each call,
    not held, so that a learner dropped without ``finish`` is freed at once (no cycle);
    the update thread lives from the first update to ``settle`` (or ``finish``)."""

    def __init__(self, learner, thread):
        m = learner.model
        self.theta = (m.params.flat, m.params.flat.copy())
        self.A = (m.A, m.A.copy())
        first = (learner.seg, learner._seg_ints, learner._seg_floats)
        self.segs = (first, m.new_segment(*learner._seg_shape))
        self.conv_scratch = np.zeros_like(m.conv_state)
        self.ssm_scratch = np.zeros_like(m.ssm_state)
        self.scratch_counters = np.zeros_like(m.counters)
        self.turn = 0
        self.thread = thread
        self.executor = None
        self.pending = None

    def run(self, L, data, freqs, pdfs, p):
        m = L.model
        start, resumed = 0, False
        while True:
            k = self.turn % 2
            _, ints, floats = self.segs[k]
            start = run_segments(
                self.theta[k], self.A[k], L.grad, L.adam_m, L.adam_v, m.params.offsets, L.need,
                L.ranges, L.lrs, m.dims, m.hyper, m.conv_state, m.ssm_state, m.counters, ints,
                floats, L._rep_ints, L._rep_floats, L.plan, data, freqs, pdfs, p, start, resumed,
            )  # fmt: skip
            if start == data.shape[0]:
                return
            self._begin_update(L, int(m.counters[C_SEG]), True)
            resumed = True

    def _begin_update(self, L, n_steps, live):
        """Hand the update of the current segment's first ``n_steps`` forwards over (to the
        thread, or run it now) and turn to the other weights and segment."""
        self.wait()
        k = self.turn % 2
        args = self._update_args(L, k, n_steps, live)
        self.turn += 1
        L.model.counters[C_SEG] = 0
        L.seg = self.segs[1 - k][0]
        if not self.thread:
            overlap_update(*args)
            return
        if self.executor is None:
            self.executor = ThreadPoolExecutor(1, "mambazip-update")
        self.pending = self.executor.submit(overlap_update, *args)

    def _update_args(self, L, k, n_steps, live):
        m = L.model
        _, ints, floats = self.segs[k]
        return (
            self.theta[k], self.A[k], self.theta[1 - k], L.grad, L.adam_m, L.adam_v,
            m.params.offsets, L.need, L.ranges, L.lrs, m.dims, m.hyper, self.conv_scratch,
            self.ssm_scratch, m.counters, self.scratch_counters, ints, floats, L.plan, n_steps,
            live,
        )  # fmt: skip

    def wait(self):
        if self.pending is not None:
            pending, self.pending = self.pending, None
            pending.result()

    def settle(self):
        """Land the update in flight and end the update thread."""
        self.wait()
        if self.executor is not None:
            self.executor.shutdown()
            self.executor = None

    def finish(self, L):
        """Land the update in flight, end the update thread, learn the unfinished segment's
        targets at once, and leave the newest weights in both buffers (T[0] the model's)."""
        self.settle()
        m = L.model
        k = self.turn % 2
        known = int(m.counters[C_SEG]) - 1
        newest = 1 - k
        if known > 0:
            # Its newest chunk's activations may be overwritten by the forward after the
            # targets: replayed, not live.
            overlap_update(*self._update_args(L, k, known, False))
            newest = k
        for buffers in (self.theta, self.A):
            buffers[1 - newest][...] = buffers[newest]
        m.counters[C_SEG] = 0
