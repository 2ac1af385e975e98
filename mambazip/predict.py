"""The predictor the codec talks to: the next byte's 256 integer frequencies, from the Mamba
alone (``mix`` none: the format before mixing, bit for bit), from the context mixer alone
(``mix.mamba`` false), or from the context mixer with the Mamba's pdf as one of its parts.

Both sides run the same calls: ``advance`` over a chunk when the bytes are known (the
encoder, and the decoder on a stored block), ``advance_byte`` once per decoded byte. The
Mamba's pdf of a byte depends only on the bytes before it, so over a chunk the Mamba runs
first and the mixer then takes its pdfs row by row, exactly as it does byte by byte.

When the caller also knows the chunk after (``advance(data, then=...)``), the Mamba runs
on it on a thread of its own while the mixer takes ``data``: the Mamba's forwards, its
overlapped update and the mixer share the cores, where the mixer would otherwise run with
the update thread idle. The Mamba and the mixer share no state but the pdfs handed over,
so the bits are the same.
"""

from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .config import VOCAB
from .errors import ConfigError
from .kernels.forward import acts_size
from .kernels.layout import N_TENSORS
from .kernels.segment import N_PLAN, segment_sizes
from .kernels.step import N_COUNTERS
from .model import OnlineLearner, segment_shapes, update_thread_default
from .params import flat_size
from .predictor import ContextMixer


class Predictor:
    """``freq`` (V,) int32 is the table of the next byte (its high nibble's with nibbles; with
    mix.bits the last byte's bit tables, each bit's made as it is coded). ``learner`` is the Mamba's
    online learner (None when the mixer runs without it): what ``--save-model`` saves."""

    def __init__(self, settings, model=None, resume=False, replay_chunk=None, nibbles=False):
        """``model``: a ``checkpoint.Checkpoint`` to start the Mamba from (``resume``: with
        its optimizer state); ``replay_chunk``: see ``OnlineLearner``. ``nibbles`` (format
        5, mixing only): a byte is coded as two nibbles, ``freq`` (16,) the next byte's high
        nibble's table, or with mix.bits (``bits``) as 8 binary decisions, ``freq`` (16,)
        the last byte's 8 two-way tables; the decoder decodes a byte with
        ``decode_nibbles``."""
        mix = settings.mix
        uses_mamba = mix is None or mix.mamba
        if model is not None and not uses_mamba:
            raise ConfigError("--model and --resume start the Mamba, which this mix leaves out")
        self.learner = None
        self._ahead = None  # (the chunk, the future of its Mamba pdfs) running ahead
        self._executor = None
        self._runs_ahead = uses_mamba and mix is not None and update_thread_default()
        if uses_mamba:
            if model is not None:
                self.learner = model.learner(settings, resume, replay_chunk)
            else:
                self.learner = OnlineLearner(settings, replay_chunk=replay_chunk)
        self.context = None
        self.nibbles = False
        self.bits = False  # a byte coded as 8 binary decisions (mix.bits, from format 5)
        if mix is None:
            self.freq = self.learner.freq
            return
        self.nibbles = bool(nibbles)
        self.context = ContextMixer(mix, self.nibbles)
        self.bits = self.context.bits
        self.context.prime(self.learner.pdf if self.learner else None)
        self.freq = self.context.freq

    def settle(self):
        """The stream ended: nothing of the Mamba's runs on after it (``OnlineLearner.settle``)."""
        if self._ahead is not None:
            ahead, self._ahead = self._ahead, None
            ahead[1].result()
        if self._executor is not None:
            self._executor.shutdown()
            self._executor = None
        if self.learner is not None:
            self.learner.settle()

    def advance(self, data, trust=None, then=None):
        """Run over ``data`` (n,) uint8. Returns (freqs, p): freqs (n, V) int32, row i the
        table data[i] is coded with (``nibbles``: (n, 32), its two nibbles' tables; ``bits``:
        (n, 16), its 8 bits' two-way tables); p (n,)
        float64, the probability the predictor gave data[i] (the Mamba alone: its float
        pdf's, before quantization). ``trust``: see ``ContextMixer.advance`` (mixing only).
        ``then``: the bytes that follow ``data`` (empty or None: none known), for the Mamba
        to run on meanwhile (mixing with the Mamba, on more than one core); the next call
        must then be ``advance(then)``, the same array."""
        if self.context is None:
            freqs, p = self.learner.advance(data)
            self.freq = self.learner.freq
            return freqs, p.astype(np.float64)
        pdfs = self._mamba_pdfs(data) if self.learner else None
        if self._runs_ahead and then is not None and then.size:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(1, "mambazip-mamba")
            self._ahead = (then, self._executor.submit(self.learner.advance_pdfs, then))
        freqs, p = self.context.advance(data, pdfs, trust=trust)
        self.freq = self.context.freq
        return freqs, p

    def _mamba_pdfs(self, data):
        """The Mamba's pdfs over ``data``: those of the run ahead, or run now."""
        if self._ahead is None:
            return self.learner.advance_pdfs(data)[0]
        (announced, future), self._ahead = self._ahead, None
        pdfs = future.result()[0]
        if announced.shape != data.shape or announced.ctypes.data != data.ctypes.data:
            raise ValueError("advance: not the bytes announced by then=")
        return pdfs

    def advance_byte(self, byte):
        """``advance`` over one decoded byte, without allocations: only ``freq`` moves on."""
        if self.context is None:
            self.learner.advance_byte(byte)
            self.freq = self.learner.freq
            return
        if self.learner is None:
            self.context.advance_byte(byte, None)
        else:
            self.learner.advance_byte_pdf(byte)
            self.context.advance_byte(byte, self.learner.pdf)
        self.freq = self.context.freq

    def decode_nibbles(self, decoder, out, start, stop):
        """With ``nibbles``, the decoder's loop: out[start:stop] (uint8) decoded from
        ``decoder`` (coder.Decoder) and learned, as ``advance_byte`` learns them. Returns 0,
        or ContextMixer.decode_byte's error at the first byte that gives one."""
        if self.learner is None:
            return self.context.decode_run(decoder, out, start, stop)
        for i in range(start, stop):
            byte = self.context.decode_byte(decoder)
            if byte < 0:
                return byte
            out[i] = byte
            self.learner.advance_byte_pdf(byte)
            self.context.advance_byte(byte, self.learner.pdf)
        return 0

    @property
    def min_byte_bits(self):
        """A lower bound on the code length of any byte: the context mixer's node
        probabilities stop at 4095/4096, so each child keeps at most 4095/4096 of its
        parent's mass (plus half a unit of rounding) and a byte costs at least
        8 log2(4096/4095) = 0.00282 bits; 0.0025 leaves a margin. With 16-bit node
        probabilities (mix.wide_final, level 4) they stop at 65535/65536: 8 log2(65536/65535)
        = 0.000176 bits, and 0.00015 leaves the same margin. The same holds for the two
        nibble tables of format 5 (each nibble's root holds 2^24) and for the 8 bits of
        mix.bits (each bit's table at most (2^b - 1) / 2^b). The Mamba alone gives a
        byte up to 1 - 255/2^24 of the mass: no useful bound."""
        if self.context is None:
            return 0.0
        return 0.00015 if self.context.cfg.wide else 0.0025

    @property
    def part_names(self):
        return self.context.part_names if self.context is not None else ("mamba",)


def memory_bytes(settings, replay_chunk=None, chunk=4096):
    """Bytes the predictor of ``settings`` allocates (tables, parameters with gradient and
    Adam moments, activations, truncated-BPTT buffers) and the codec's per-chunk tables of
    ``chunk`` bytes: computed from the settings alone, so that a header can be refused
    before anything is allocated."""
    total = chunk * VOCAB * (4 + 4) + chunk * 16  # freqs, pdfs, p and bits of a chunk
    mix = settings.mix
    if mix is not None:
        total += mix.memory_bytes()
    if mix is not None and not mix.mamba:
        return total
    if mix is not None:
        total += chunk * VOCAB * 4  # the pdfs of the chunk the Mamba runs ahead on
    cfg, train = settings.model, settings.train
    dims = cfg.dims()
    L, K, E, N = cfg.n_layer, cfg.d_conv, cfg.d_inner, cfg.d_state
    total += 4 * 4 * flat_size(cfg)  # weights, gradient, two Adam moments
    total += 4 * (K * L * E + 2 * L * E * N)  # conv state, SSM state, A
    total += 4 * acts_size(dims)
    total += 4 * N_TENSORS + 8 * N_PLAN  # learning-rate multipliers (at most one per tensor), plan
    n_ints, n_floats = segment_sizes(dims, 1, 1)  # bptt=1 scratch
    total += 8 * n_ints + 4 * n_floats
    if train.bptt > 1 and train.optimizer != "none":
        live, replay = segment_shapes(dims, train, replay_chunk)
        # An overlapped update has a second segment, weights and A, and a scratch state and
        # counters.
        for shape in (live, replay, live if train.overlap else None):
            if shape is not None:
                n_ints, n_floats = segment_sizes(dims, *shape)
                total += 8 * n_ints + 4 * n_floats
        if train.overlap:
            total += 4 * flat_size(cfg) + 4 * (K * L * E + 2 * L * E * N) + 8 * N_COUNTERS
    return total
