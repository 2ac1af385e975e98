"""Context-mixing byte predictor: context models, a match model and (optionally) the Mamba's pdf,
combined per binary decision of the byte, turned into 256 integer frequencies per byte.

The codec talks to ``ContextMixer`` only. Encoder: ``prime`` then ``advance`` over chunks;
decoder: ``prime`` then ``advance_byte`` per decoded byte (format 5: ``decode_byte`` before
each, or ``decode_run`` over a chunk without the Mamba). Both run the same compiled loop
(loop.py), so their tables are bit-identical.

Parts, one module each: history (byte ring buffer, context hashes), counters (stretch / squash,
bit counters, adaptive maps), context (hashed nibble-slot context models), match (match model),
byte_pdf (the Mamba adapter), combiner (logistic mixing), apm (SSE), loop (the per-byte loop),
config (MixConfig).
"""

import numpy as np

from .apm import apm_init
from .combiner import W_ONE, combiner_init
from .config import DEFAULT, FAST, MAX, SMALL, MixConfig
from .context import history_map_init, state_map_init
from .counters import map_init
from .history import KIND_CODES
from .loop import (
    BITS,
    D_ACOUNT,
    D_APM,
    D_APM2_MASK,
    D_APM_MEAN,
    D_APM_RATE,
    D_BMASK,
    D_BYTES,
    D_C2SEL,
    D_CCOLS,
    D_CLIMIT,
    D_CONF,
    D_DEAD,
    D_DET,
    D_DMODE,
    D_FINAL,
    D_FLR,
    D_FNODE,
    D_FOUND,
    D_FSEL,
    D_FULL_LOG,
    D_HALF,
    D_HCOL,
    D_HMASK,
    D_LAST,
    D_LR,
    D_LR_DECAY,
    D_MAMBA,
    D_MATCH,
    D_MCOLS,
    D_MCTX2,
    D_MEAPM,
    D_MINLEN,
    D_MINLEN2,
    D_MLIMIT,
    D_MLR,
    D_MSEL,
    D_NCTX,
    D_NIBBLES,
    D_NIN,
    D_NPARTS,
    D_NSETS,
    D_PBITS,
    D_PROMOTE,
    D_RECOVER,
    D_ROWHALF,
    D_RUN,
    D_SCHEDULE,
    D_SLOT_LOG,
    D_SSE,
    D_STATES,
    N_DIMS,
    N_FINAL_ROWS,
    N_PROMOTED,
    V_APM1,
    V_APM2,
    V_APM4,
    V_APME,
    V_APMM,
    V_APMS,
    V_BMAPS,
    V_FREQ,
    V_HMAPS,
    V_INBYTE,
    V_INPDF,
    V_KINDS,
    V_MAPS,
    V_NFREQ,
    V_PARTS,
    V_RMAPS,
    V_W,
    V_WF,
    V_XCODES,
    V_XSTART,
    allocate,
    context_columns,
    decode_byte,
    decode_run,
    group_column,
    n_inputs,
    prime,
    run,
    set_rows,
    step,
    step_low,
    view,
)

__all__ = ["DEFAULT", "FAST", "MAX", "SMALL", "ContextMixer", "MixConfig"]

BUCKET_SLOTS = 4  # context.BUCKET


class ContextMixer:
    """The predictor's whole state (flat buffers allocated once) and its per-byte API.

    ``freq`` (256,) int32 is the frequency table of the next byte (each >= 1, sum 2^24); valid
    after ``prime``. ``part_names`` names the columns of ``trust``.

    ``nibbles`` (format 5): a byte is two 16-symbol nibbles, only the byte's path evaluated.
    ``freq`` (16,) is then the next byte's high-nibble table, and ``freq_low`` (16,) the low
    nibble's once ``advance_nibble`` has been given the high nibble (each >= 1, sum 2^24).
    ``decode_byte`` and ``decode_run`` decode with those tables inside the compiled loop.
    ``bits`` (nibbles and mix.bits): a byte is 8 binary decisions, its nodes predicted as its
    bits are coded; ``freq`` (16,) then holds the last byte's 8 two-way tables.
    """

    def __init__(self, cfg=DEFAULT, nibbles=False):
        if not isinstance(cfg, MixConfig):
            raise TypeError("cfg must be a MixConfig")
        self.cfg = cfg
        self.nibbles = bool(nibbles)
        self.bits = self.nibbles and cfg.bits
        self.part_names = cfg.part_names
        self.buffers, self.offs = allocate(cfg)
        b = self.buffers
        self._bufs = (b["u8"], b["u16"], b["u64"], b["i32"], b["i64"], b["f64"])
        self._bufs7 = (*self._bufs, b["f32"])
        self._inbyte = view(b, self.offs, V_INBYTE)
        self._inpdf = view(b, self.offs, V_INPDF)
        self.dims = self._dims(cfg)
        self.dims[D_NIBBLES] = BITS if self.bits else self.nibbles
        self._init_tables(cfg)
        self.freq = view(b, self.offs, V_FREQ)
        self.freq_low = None
        if self.bits:
            self.freq = view(b, self.offs, V_NFREQ)[:16]
        elif self.nibbles:
            nfreq = view(b, self.offs, V_NFREQ)
            self.freq, self.freq_low = nfreq[:16], nfreq[16:]
        # Work arrays of advance_byte and of calls without a Mamba or without trust.
        self._byte = np.zeros(1, np.uint8)
        self._pdf = np.zeros((1, 256), np.float32)
        self._freqs1 = np.zeros((1, 256), np.int32)
        self._p1 = np.zeros(1, np.float64)
        self._trust1 = np.zeros((1, len(self.part_names)), np.float32)
        self._coder = (np.zeros(0, np.uint32), np.zeros(4, np.uint64), np.zeros(2))

    @staticmethod
    def _dims(cfg):
        dims = np.zeros(N_DIMS, np.int64)
        dims[D_NCTX] = len(cfg.context_kinds)
        dims[D_NIN] = n_inputs(cfg)
        dims[D_NSETS] = 3 + cfg.mamba + cfg.found_set + cfg.c2_set + len(cfg.weight_sets)
        dims[D_MATCH] = cfg.match
        dims[D_MAMBA] = cfg.mamba
        dims[D_FINAL] = cfg.final
        dims[D_APM] = cfg.apm
        dims[D_HMASK] = (1 << cfg.hist_log) - 1
        dims[D_BMASK] = (1 << cfg.ctx_log) // BUCKET_SLOTS - 1
        dims[D_MINLEN] = cfg.match_min
        dims[D_CLIMIT] = cfg.counter_limit
        dims[D_MLIMIT] = cfg.map_limit
        dims[D_LR] = cfg.combiner_lr
        dims[D_FLR] = cfg.final_lr
        dims[D_APM_RATE] = cfg.apm_rate
        dims[D_APM2_MASK] = (1 << cfg.apm_log) - 1
        dims[D_NPARTS] = len(cfg.part_names)
        dims[D_FULL_LOG] = cfg.full_log
        dims[D_SLOT_LOG] = cfg.slot_log
        dims[D_MSEL] = cfg.mamba_sel
        dims[D_MLR] = cfg.mamba_lr
        dims[D_MEAPM] = cfg.mamba_eapm
        dims[D_FOUND] = cfg.found_set
        dims[D_SSE] = cfg.sse_pair
        dims[D_FSEL] = cfg.final_by_node
        dims[D_C2SEL] = cfg.c2_set
        dims[D_SCHEDULE] = cfg.counter_schedule
        dims[D_APM_MEAN] = cfg.apms_alone
        dims[D_DEAD] = cfg.dead_error
        dims[D_PROMOTE] = N_PROMOTED if cfg.promoted else 0
        dims[D_LAST] = cfg.slot_last_byte
        dims[D_LR_DECAY] = cfg.rate_decays and not cfg.row_rate_log
        dims[D_ROWHALF] = (1 << cfg.row_rate_log) if cfg.row_rate_log else 0
        dims[D_HCOL] = len(cfg.context_kinds) if cfg.bit_histories else 0
        dims[D_CCOLS] = context_columns(cfg)
        dims[D_CONF] = group_column(cfg, "conf")
        dims[D_DET] = group_column(cfg, "det")
        dims[D_DMODE] = cfg.det_inputs
        dims[D_RUN] = group_column(cfg, "run")
        dims[D_BYTES] = group_column(cfg, "bytes")
        dims[D_HALF] = cfg.halved
        dims[D_ACOUNT] = cfg.apm_counts
        dims[D_PBITS] = 16 if cfg.wide else 12
        dims[D_MCOLS] = cfg.match_columns
        dims[D_RECOVER] = cfg.match_recovery
        dims[D_MINLEN2] = cfg.match_hash2
        dims[D_MCTX2] = int(cfg.match_ctx2 and cfg.match_two) | 2 * (cfg.match_recovery > 0)
        dims[D_STATES] = cfg.history_states | 2 * cfg.history_by_depth
        dims[D_FNODE] = cfg.found_node
        return dims

    def _init_tables(self, cfg):
        b, offs = self.buffers, self.offs
        kinds = cfg.context_kinds
        view(b, offs, V_KINDS)[:] = [KIND_CODES[k] for k in kinds]
        parts = view(b, offs, V_PARTS)
        parts[:] = -1  # the bias column belongs to no part
        parts[: context_columns(cfg)] = np.tile(np.arange(len(kinds)), len(cfg.input_groups))
        col, part = context_columns(cfg), len(kinds)
        for on, ncols in ((cfg.match, cfg.match_columns), (cfg.mamba, 2)):
            if on:
                parts[col : col + ncols] = part
                col, part = col + ncols, part + 1
        codes, starts = set_rows(cfg)
        view(b, offs, V_XCODES)[:] = codes
        view(b, offs, V_XSTART)[:] = starts
        map_init(view(b, offs, V_MAPS))
        if cfg.history_states:
            state_map_init(view(b, offs, V_HMAPS))
        else:
            history_map_init(view(b, offs, V_HMAPS))
        view(b, offs, V_RMAPS)[:] = 2048 << 19  # p = 1/2, count 0
        view(b, offs, V_BMAPS)[:] = 2048 << 19
        for v in (V_APM1, V_APM2, V_APMM, V_APME, V_APMS, V_APM4):
            apm_init(view(b, offs, v))
        nin = n_inputs(cfg)
        w = view(b, offs, V_W).reshape(-1, nin)
        combiner_init(w, W_ONE // 4)
        w[:, nin - 1] = 0
        w[:, len(kinds) : context_columns(cfg)] = 0
        if cfg.mamba:
            mcol = context_columns(cfg) + cfg.match_columns
            w[:, mcol : mcol + 2] = W_ONE * cfg.mamba_w0 // 64
        nsets = int(self.dims[D_NSETS])
        wf = view(b, offs, V_WF).reshape(N_FINAL_ROWS, -1)
        combiner_init(wf, W_ONE // nsets)
        wf[:, nsets:] = 0  # the promoted inputs start without a say

    def _pdf_arg(self, pdf, rows):
        if not self.cfg.mamba:
            if pdf is not None:
                raise ValueError("this predictor was configured without the Mamba (mamba=False)")
            return self._pdf, False
        pdf = np.ascontiguousarray(pdf, dtype=np.float32).reshape(rows, 256)
        return pdf, True

    def prime(self, mamba_pdf=None):
        """Set ``freq`` to the first byte's table (mamba_pdf (256,) float32: its pdf)."""
        pdf, use = self._pdf_arg(mamba_pdf, 1)
        prime(*self._bufs, self.offs, self.dims, pdf[0], use)

    def advance(self, data, mamba_pdfs=None, trust=None):
        """Code-side step over a chunk: data (n,) uint8; mamba_pdfs (n, 256) float32, row i the
        pdf of the byte after data[i] (None without the Mamba); trust None or (n, P) float32,
        filled with each part's share of |w x| over the 8 nodes of each byte.

        Returns (freqs (n, 256) int32, the table each byte is coded with; p (n,) float64, its
        probability freqs[i, data[i]] / 2^24). Afterwards ``freq`` is the next byte's table.
        With ``nibbles``: freqs (n, 32), row i the tables of data[i]'s high nibble (:16) and
        of its low nibble (16:), p[i] the product of the two nibbles' probabilities; with
        ``bits``: freqs (n, 16), row i the 8 two-way tables of data[i]'s bits, the most
        significant first, p[i] the product of the 8 bits' probabilities."""
        data = np.ascontiguousarray(data, dtype=np.uint8).reshape(-1)
        n = data.shape[0]
        pdfs, use = self._pdf_arg(mamba_pdfs, n) if n else (self._pdf, False)
        freqs = np.empty((n, 16 if self.bits else 32 if self.nibbles else 256), np.int32)
        p = np.empty(n, np.float64)
        want = trust is not None
        if want:
            if trust.shape != (n, len(self.part_names)) or trust.dtype != np.float32:
                raise ValueError(f"trust must be float32 of shape {(n, len(self.part_names))}")
            trust[:] = 0.0
        else:
            trust = self._trust1
        run(*self._bufs, self.offs, self.dims, data, pdfs, use, freqs, p, trust, want,
            self._coder)  # fmt: skip
        return freqs, p

    def advance_byte(self, byte, mamba_pdf=None):
        """Decode-side step: learn one byte, set ``freq`` to the next byte's table (mamba_pdf
        (256,) float32: the pdf of that next byte). Allocates nothing."""
        self._inbyte[0] = byte
        if self.cfg.mamba:
            self._inpdf[:] = mamba_pdf
        elif mamba_pdf is not None:
            raise ValueError("this predictor was configured without the Mamba (mamba=False)")
        # One call of nine arguments (the byte and the pdf travel in the buffers): the dispatch
        # of run's fifteen cost a few µs per byte.
        step(*self._bufs7, self.offs, self.dims)

    def advance_nibble(self, high):
        """With ``nibbles``: the next byte's high nibble is ``high``; set ``freq_low`` to its
        low nibble's table (the step between a byte's two nibbles that ``decode_byte`` makes
        inside its one call). Allocates nothing."""
        if self.bits:
            raise ValueError("advance_nibble: this predictor codes bits (mix.bits)")
        self._inbyte[0] = high
        step_low(*self._bufs7, self.offs, self.dims)

    def decode_byte(self, decoder):
        """Decode-side, with ``nibbles``, one call for what ``advance_nibble`` and two
        decodes do: the next byte from ``decoder`` (coder.Decoder) under ``freq`` and then
        ``freq_low`` (with ``bits``: its 8 bits, each node predicted as its bit is due), not
        yet learned (``advance_byte`` follows). Returns the byte, or -1 where the words do
        not decode, -2 past the decoder's cost budget."""
        return decode_byte(*self._bufs7, self.offs, self.dims, decoder.words, decoder.state,
                           decoder.cost)  # fmt: skip

    def decode_run(self, decoder, out, start, stop):
        """decode_byte and advance_byte for out[start:stop] (uint8) in one call, without the
        Mamba. Returns 0, or decode_byte's error at the first byte that gives one."""
        return decode_run(*self._bufs7, self.offs, self.dims, decoder.words, decoder.state,
                          decoder.cost, out, start, stop)  # fmt: skip
