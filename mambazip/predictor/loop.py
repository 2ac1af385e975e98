"""The one per-byte loop: predict the byte tree's nodes -> integer frequencies; learn the byte.

Three modes (dims[D_NIBBLES]). Formats 3 and 4: all 255 nodes, one 256-way table freq.
Format 5: only the byte's path, a nibble at a time: the high nibble's 15 nodes give its
16-way table (nfreq[:16]); once the coder knows the high nibble, the 15 nodes under it give
the low nibble's (nfreq[16:]). Each node is predicted exactly as in the first mode (the same
inputs, weights, full/c0-only choice and slot lookups), and learning is the same: on the 8
nodes taken. mix.bits (BITS, format 5 on): the byte's 8 nodes alone, each in full, predicted
as its bit is coded (_bits), its two-way table in nfreq[2d : 2d + 2].

Dimensions: C context models, NIN combiner inputs (C context columns, then 2 match, then 2 Mamba
columns when those parts are on, then a constant bias of 256), R weight sets (R_SETS selectors:
partial byte c0, match state, order-1 byte, and the Mamba's expected-byte agreement when the
Mamba is on), P parts (for ``trust``).

All state lives in six flat buffers, one per dtype, carved into the named views of ``VIEWS``
(``offs[v] = (start, count)`` in its buffer), so a compiled call takes a dozen arguments:
    u8:  hist (H,)
    u16: tbl (S * 16,), apm1 (65536 * 33,), apm2 (2^apm_log * 33,), apmm (65536 * 33,)
    u64: ctxh (C,), words (3,), orders (N_ORDERS,)
    i32: maps (C * 4096,), mt (T,), mmap (64,), w (N_ROWS * NIN,) weight sets, wf
         (N_FINAL_ROWS * R_SETS,) final weights by depth or node; work of the last
         prediction: x (256 * NIN,) inputs, midx (256 * C,) adaptive-map entries, sel
         (256 * R_SETS,) weight-set rows, sst (256 * R_SETS,) their outputs,
         sf (256,) final stretch, aidx (256 * N_APMS,) APM buckets, p12 (256,) node probabilities
         (12-bit; 16-bit with mix.wide_final),
         pm (256,) the Mamba's node probabilities, freq (256,) the frequency table, mode
         (256,) 1 where a node was predicted in full, 0 by the c0 weight set alone,
         nfreq (32,) format 5's two nibble tables (mix.bits: the 8 bits' tables in
         [:16]); hmaps (C * 128,) and hidx (256 * C,) of the bit histories, rmaps and ridx
         of mix.run_inputs (context.py)
    u8:  hst (S * 16,) the bit histories beside the slots (mix.histories)
    u16: apms ((2^apm_log + MATCH_APM) * 33,) the SSE pair (mix.sse), apm4 (2^apm_log * 33,)
         the order-4 APM (mix.sse_order4); i32: aidx4 (256,) its buckets
    u8:  apm1n, apm2n, apmsn, apm4n: with mix.apm_counts, a count beside each APM bucket
    i64: hstate (3,), mstate (3,), expected (1,), kinds (C,), parts (NIN,), mass (512,),
         nmass (32,) a nibble's tree, found (2,) how many models know the first and the
         second nibble's context, slots (C,) with mix.bits each model's slot of the nibble
         being coded
    f64: tree (512,)
    i64: rec (record.REC_SIZE,) the record model's state, where a record context or set is
         used
Node n of the byte tree (1..255) is the partial byte c0 (paq style); depth(n) = bits known.

Frequencies: the root holds FREQ_TOTAL = 2^24; each node splits its mass m between its children,
r = round(m p12 / 4096) to the bit-1 child clamped to [L, m - L] where L = leaves per child, so
each of the 256 leaves gets >= 1 and they sum exactly to 2^24, and f(b) / 2^24 is exactly the
product of the split ratios along b's path (the bitwise code length). Format 5 quantizes
each nibble's 16-way table the same way on the nibble's own tree (nibble_table): f(b) / 2^48
= f_high / 2^24 * f_low / 2^24 is again the product of the 8 split ratios on b's path.
"""

import math

import numpy as np

from ..coder import range_decode
from ..jit import kernel, kernel_inline
from ..kernels.step import FREQ_BITS, FREQ_TOTAL
from .apm import apm_predict, apm_predict_bits, apm_update, apm_update_counted
from .byte_pdf import mamba_context, node_prob, node_sums
from .combiner import combine, row_scale, train
from .context import (
    BYTE_ENTRIES,
    DEPTH_BUCKETS,
    HISTORY_STATES,
    NODE2,
    NODE2_LOCAL,
    RUN_ENTRIES,
    RUNS,
    STATE_SLOTS,
    find_slots,
    predict_first,
    predict_second,
    read_node,
    update_contexts,
)
from .counters import MAP_SIZE, squash, stretch
from .history import (
    IND_SIZE,
    N_ORDERS,
    back,
    char_class,
    context_hashes,
    fmix,
    history_push,
    is_letter,
)
from .match import (
    MSTATE,
    SECOND,
    cand_advance,
    cand_inputs,
    length_bucket,
    map_entries,
    match_context,
    misses,
    update_cand_map,
)
from .record import LENGTH, REC_SIZE, RECORD_KINDS, RECORD_SETS, record_context, record_push

u64 = np.uint64

VIEWS = (
    ("hist", "u8"),
    ("tbl", "u16"),
    ("apm1", "u16"),
    ("apm2", "u16"),
    ("apmm", "u16"),
    ("apme", "u16"),
    ("ctxh", "u64"),
    ("words", "u64"),
    ("orders", "u64"),
    ("maps", "i32"),
    ("mt", "i32"),
    ("mmap", "i32"),
    ("w", "i32"),
    ("wf", "i32"),
    ("x", "i32"),
    ("midx", "i32"),
    ("sel", "i32"),
    ("sst", "i32"),
    ("sf", "i32"),
    ("aidx", "i32"),
    ("p12", "i32"),
    ("pm", "i32"),
    ("freq", "i32"),
    ("mode", "i32"),
    ("hstate", "i64"),
    ("mstate", "i64"),
    ("expected", "i64"),
    ("kinds", "i64"),
    ("parts", "i64"),
    ("mass", "i64"),
    ("tree", "f64"),
    ("inbyte", "i64"),
    ("inpdf", "f32"),
    ("trust1", "f32"),
    ("nfreq", "i32"),
    ("nmass", "i64"),
    ("found", "i64"),
    ("apms", "u16"),
    ("hst", "u8"),
    ("hmaps", "i32"),
    ("hidx", "i32"),
    ("ind", "u16"),
    ("xcodes", "i64"),
    ("xstart", "i64"),
    ("xrow", "i64"),
    ("runs", "u8"),
    ("rmaps", "i32"),
    ("ridx", "i32"),
    ("apm4", "u16"),
    ("aidx4", "i32"),
    ("apm1n", "u8"),
    ("apm2n", "u8"),
    ("apmsn", "u8"),
    ("apm4n", "u8"),
    ("mt2", "i32"),
    ("wn", "i32"),
    ("wfn", "i32"),
    ("bh", "u8"),
    ("bmaps", "i32"),
    ("bidx", "i32"),
    ("slots", "i64"),
    ("rec", "i64"),
)
(V_HIST, V_TBL, V_APM1, V_APM2, V_APMM, V_APME, V_CTXH, V_WORDS, V_ORDERS, V_MAPS, V_MT, V_MMAP,
 V_W, V_WF,
 V_X, V_MIDX, V_SEL, V_SST, V_SF, V_AIDX, V_P12, V_PM, V_FREQ, V_MODE, V_HSTATE, V_MSTATE,
 V_EXPECTED, V_KINDS, V_PARTS, V_MASS, V_TREE, V_INBYTE, V_INPDF,
 V_TRUST1, V_NFREQ, V_NMASS, V_FOUND, V_APMS,
 V_HST, V_HMAPS, V_HIDX, V_IND, V_XCODES, V_XSTART, V_XROW, V_RUNS, V_RMAPS,
 V_RIDX, V_APM4, V_AIDX4, V_APM1N, V_APM2N, V_APMSN, V_APM4N,
 V_MT2, V_WN, V_WFN, V_BH, V_BMAPS, V_BIDX, V_SLOTS, V_REC) = range(len(VIEWS))  # fmt: skip
DTYPES = {"u8": np.uint8, "u16": np.uint16, "u64": np.uint64, "i32": np.int32, "i64": np.int64,
          "f64": np.float64, "f32": np.float32}  # fmt: skip

# Weight-set selectors: first row of each in w, and its number of rows.
ROW_C0, ROW_MATCH, ROW_C1, ROW_MAMBA, ROW_FOUND, ROW_C2, N_ROWS = 0, 256, 384, 640, 736, 864, 1120
# The weight sets of mix.sets, after those rows, in the order chosen: each has a row per
# context value (SET_VALUES) and depth. Their codes are part of the format.
SET_CODES = {"classes": 0, "wordlen": 1, "column": 2, "c1depth": 3, "c3": 4, "hibits": 5,
             "word": 6, "pos4": 7, "record_pos": 8}  # fmt: skip
SET_VALUES = (64, 16, 32, 256, 256, 256, 256, 256, 256)  # by code
N_PROMOTED = 2  # mix.promote: the Mamba's two inputs also enter the final combiner
R_SETS = 6 + len(SET_CODES) + N_PROMOTED  # sst's columns: the sets' outputs, then those
MAX_WORDLEN = 15  # the wordlen set's last value
MAX_FOUND = 15  # the found-count selector's last value
N_FINAL_ROWS = 256  # final weights by depth (rows 0-7) or by node (final_sel 1)

# Positions in the int64 ``dims`` array.
(D_NCTX, D_NIN, D_NSETS, D_MATCH, D_MAMBA, D_FINAL, D_APM, D_HMASK, D_BMASK, D_MINLEN, D_CLIMIT,
 D_MLIMIT, D_LR, D_FLR, D_APM_RATE, D_APM2_MASK, D_NPARTS, D_FULL_LOG,
 D_SLOT_LOG, D_MSEL, D_MLR, D_MEAPM, D_NIBBLES, D_FOUND, D_SSE, D_HCOL,
 D_FSEL, D_C2SEL, D_LR_DECAY, D_SCHEDULE, D_APM_MEAN, D_DEAD, D_PROMOTE,
 D_LAST, D_CCOLS, D_CONF, D_DET, D_DMODE, D_RUN, D_ACOUNT, D_PBITS, D_MCOLS, D_RECOVER,
 D_MINLEN2, D_MCTX2, D_ROWHALF, D_STATES, D_BYTES, D_HALF, D_FNODE) = range(50)  # fmt: skip
N_DIMS = 50
BITS = 2  # dims[D_NIBBLES] with mix.bits: a byte coded as 8 binary decisions (format 5 on)
LR_DECAY_LOG = 16
MATCH_APM = 128 * 256  # contexts of the match APM: the match selector x node
# APM buckets a node uses: order 1, order 2, the Mamba's, the Mamba-keyed one, sse's two.
N_APMS = 6

DEPTH = np.array([0] + [n.bit_length() - 1 for n in range(1, 256)], np.int64)


def context_columns(cfg):
    """Combiner inputs of the context models: one per model in each of cfg.input_groups."""
    return len(cfg.context_kinds) * len(cfg.input_groups)


def group_column(cfg, group):
    """x column of model 0's input of a group of cfg.input_groups (0: the group is off)."""
    groups = cfg.input_groups
    return len(cfg.context_kinds) * groups.index(group) if group in groups else 0


def n_inputs(cfg):
    return context_columns(cfg) + cfg.match_columns + 2 * cfg.mamba + 1


def set_rows(cfg):
    """(codes, first rows) of cfg's weight sets of mix.sets."""
    codes = [SET_CODES[name] for name in cfg.weight_sets]
    starts = N_ROWS + 8 * np.cumsum([0] + [SET_VALUES[c] for c in codes])
    return codes, starts[:-1].tolist()


def weight_rows(cfg):
    return N_ROWS + 8 * sum(SET_VALUES[SET_CODES[name]] for name in cfg.weight_sets)


def history_maps(cfg):
    """Adaptive maps per context model from its bit histories (context.py)."""
    if not cfg.bit_histories:
        return 0
    maps = (3 * (RUNS if cfg.slot_runs else 1)) if cfg.slot_last_byte else 1
    return maps * (DEPTH_BUCKETS if cfg.history_by_depth else 1)


def history_entries(cfg):
    """Entries of one history map: a bit history's, or with mix.states a state's."""
    return STATE_SLOTS if cfg.history_states else HISTORY_STATES


def match_map_entries(cfg):
    """The match model's maps: one per candidate (match.map_entries); 64 without the options."""
    if not (cfg.match_recovery or cfg.match_two):
        return 64
    return (1 + cfg.match_two) * map_entries(cfg.match_recovery, cfg.match_two)


def layout(cfg):
    """{view name: element count} for cfg; the buffers hold these back to back."""
    C = len(cfg.context_kinds)
    nin = n_inputs(cfg)
    return {
        "hist": 1 << cfg.hist_log,
        "tbl": (1 << cfg.ctx_log) * 16,
        "apm1": (65536 * 33) if cfg.apm else 0,
        "apm2": ((1 << cfg.apm_log) * 33) if cfg.apm else 0,
        "apmm": (65536 * 33) if cfg.mamba else 0,
        "apme": (65536 * 33) if cfg.mamba and cfg.mamba_eapm else 0,
        "ctxh": C,
        "words": 4,
        "orders": N_ORDERS,
        "maps": C * MAP_SIZE,
        "mt": (1 << cfg.match_log) if cfg.match else 0,
        "mmap": match_map_entries(cfg),
        "w": weight_rows(cfg) * nin,
        "wf": N_FINAL_ROWS * R_SETS,
        "x": 256 * nin,
        "midx": 256 * C,
        "sel": 256 * R_SETS,
        "sst": 256 * R_SETS,
        "sf": 256,
        "aidx": 256 * N_APMS,
        "p12": 256,
        "pm": 256,
        "freq": 256,
        "mode": 256,
        "hstate": 3,
        "mstate": MSTATE if cfg.match_recovery or cfg.match_two else 3,
        "expected": 1,
        "kinds": C,
        "parts": nin,
        "mass": 512,
        "tree": 512,
        "inbyte": 1,
        "inpdf": 256,
        "trust1": len(cfg.part_names),
        "nfreq": 32,
        "nmass": 32,
        "found": 2,
        "apms": ((1 << cfg.apm_log) + MATCH_APM) * 33 if cfg.apm and cfg.sse_pair else 0,
        "hst": (1 << cfg.ctx_log) * 16 if cfg.bit_histories else 0,
        "hmaps": C * history_entries(cfg) * history_maps(cfg),
        "hidx": 256 * C,
        "ind": IND_SIZE if {"indirect1", "indirect2"} & set(cfg.context_kinds) else 0,
        "xcodes": len(cfg.weight_sets),
        "xstart": len(cfg.weight_sets),
        "xrow": len(cfg.weight_sets),
        "runs": (1 << cfg.ctx_log) if cfg.slot_runs else 0,
        "rmaps": C * RUN_ENTRIES * (3 if cfg.run_mode == 2 else 1)
        if "run" in cfg.input_groups
        else 0,
        "ridx": 256 * C if "run" in cfg.input_groups else 0,
        "apm4": (1 << cfg.apm_log) * 33 if cfg.apm_order4 else 0,
        "aidx4": 256 if cfg.apm_order4 else 0,
        "apm1n": 65536 * 33 if cfg.apm and cfg.apm_counts else 0,
        "apm2n": (1 << cfg.apm_log) * 33 if cfg.apm and cfg.apm_counts else 0,
        "apmsn": ((1 << cfg.apm_log) + MATCH_APM) * 33
        if cfg.apm and cfg.sse_pair and cfg.apm_counts
        else 0,
        "apm4n": (1 << cfg.apm_log) * 33 if cfg.apm_order4 and cfg.apm_counts else 0,
        "mt2": (1 << cfg.match_log) if cfg.match_two else 0,
        "wn": weight_rows(cfg) if cfg.row_rate_log else 0,
        "wfn": N_FINAL_ROWS if cfg.row_rate_log else 0,
        "bh": (1 << cfg.ctx_log) * 2 if cfg.slot_bytes else 0,
        "bmaps": C * BYTE_ENTRIES if cfg.slot_bytes else 0,
        "bidx": 256 * C if cfg.slot_bytes else 0,
        "slots": C,
        "rec": REC_SIZE
        if RECORD_KINDS & set(cfg.context_kinds) or RECORD_SETS & set(cfg.weight_sets)
        else 0,
    }


def layout_bytes(cfg):
    sizes = layout(cfg)
    return sum(sizes[name] * np.dtype(DTYPES[kind]).itemsize for name, kind in VIEWS)


def allocate(cfg):
    """(buffers {kind: zeroed array}, offs (len(VIEWS), 2) int64) for cfg."""
    sizes = layout(cfg)
    offs = np.zeros((len(VIEWS), 2), np.int64)
    totals = dict.fromkeys(DTYPES, 0)
    for v, (name, kind) in enumerate(VIEWS):
        offs[v] = totals[kind], sizes[name]
        totals[kind] += sizes[name]
    buffers = {kind: np.zeros(totals[kind], DTYPES[kind]) for kind in DTYPES}
    return buffers, offs


def view(buffers, offs, v):
    """View v of the buffers, from Python."""
    start, count = offs[v]
    return buffers[VIEWS[v][1]][start : start + count]


@kernel_inline
def _carve(buf, offs, v):
    return buf[offs[v, 0] : offs[v, 0] + offs[v, 1]]


@kernel_inline
def _histories(u8, i32, offs, dims):
    """context.py's hs: the bit histories' views, column (0: none), last-byte flag, runs, the
    columns and tables of the inputs of mix.conf_inputs, det_inputs and run_inputs,
    mix.states, the byte histories' view, column and tables, and mix.half_inputs."""
    nctx = dims[D_NCTX]
    return (_carve(u8, offs, V_HST).reshape((-1, 16)), _carve(i32, offs, V_HMAPS),
            _carve(i32, offs, V_HIDX).reshape((256, nctx)), dims[D_HCOL],
            dims[D_LAST] != 0, _carve(u8, offs, V_RUNS), dims[D_CONF], dims[D_DET],
            dims[D_DMODE], dims[D_RUN], _carve(i32, offs, V_RMAPS),
            _carve(i32, offs, V_RIDX).reshape((-1, nctx)), dims[D_STATES],
            _carve(u8, offs, V_BH).reshape((-1, 2)), dims[D_BYTES], _carve(i32, offs, V_BMAPS),
            _carve(i32, offs, V_BIDX).reshape((-1, nctx)), dims[D_HALF])  # fmt: skip


@kernel
def _set_rows(xrow, codes, starts, hist, hstate, words, mask, c1, c2, records):
    """xrow[j] = the row at depth 0 of weight set j of mix.sets for the next byte."""
    r = records[LENGTH] if records.shape[0] > 0 else 0
    for j in range(codes.shape[0]):
        code = codes[j]
        if code == 0:  # the character classes of the last two bytes
            v = char_class(c1) * 8 + char_class(c2)
        elif code == 1:  # the letters since the last non-letter
            v = 0
            while v < MAX_WORDLEN and is_letter(back(hist, hstate, mask, v + 1)):
                v += 1
        elif code == 2:  # the column, the last bucket shared by columns past it
            v = min(hstate[0] - hstate[1], SET_VALUES[2] - 1)
        elif code == 3:  # c1depth: the last byte
            v = c1
        elif code == 4:  # c3: the byte three back
            v = np.int64(back(hist, hstate, mask, 3))
        elif code == 5:  # hibits: the top 3 bits of the last two bytes and the top 2 of the third
            c3 = np.int64(back(hist, hstate, mask, 3))
            v = (c1 >> 5) | ((c2 >> 5) << 3) | ((c3 >> 6) << 6)
        elif code == 6:  # word: the word so far (history.py's hash) in 8 bits, 0 outside one
            v = np.int64(fmix(words[0]) & u64(255)) if is_letter(c1) else 0
        elif code == 7:  # pos4: the position mod 4 (records of 2 and 4 bytes) and c1's top 6 bits
            v = (hstate[0] & 3) * 64 + (c1 >> 2)
        else:  # record_pos: the position in the record (record.py), the last bucket shared
            v = min(hstate[0] % r, SET_VALUES[8] - 1) if r else 0  # past it, 0 without one
        xrow[j] = starts[j] + 8 * v


@kernel
def decayed_lr(lr, t):
    """The combiner's rate after t bytes under level 1: 3 lr at the start, 2 lr after
    2^LR_DECAY_LOG bytes, lr in the end (small files learn fast, large ones settle)."""
    return lr + (lr << (LR_DECAY_LOG + 1)) // ((1 << LR_DECAY_LOG) + t)


@kernel
def split_node(mass, node, p):
    """Split mass[node] between its children by the 12-bit p(bit = 1), each child keeping at
    least its number of leaves (module docstring)."""
    split_bits(mass, node, p, 12)


@kernel
def split_bits(mass, node, p, bits):
    """split_node by a probability p of bits bits (16 with mix.wide_final)."""
    m = mass[node]
    leaves = np.int64(128) >> DEPTH[node]
    r = (m * np.int64(p) + (1 << (bits - 1))) >> bits
    r = min(max(r, leaves), m - leaves)
    mass[2 * node + 1] = r
    mass[2 * node] = m - r


@kernel
def tree_to_freqs(freq, mass, p12):
    """freq (256,) from node probabilities p12 (256,); mass (512,) work."""
    mass[1] = FREQ_TOTAL
    for n in range(1, 256):
        split_node(mass, n, p12[n])
    for b in range(256):
        freq[b] = np.int32(mass[256 + b])


@kernel
def nibble_table(nfreq, at, nmass, p12, nib):
    """nfreq[at : at + 16] = the 16-way table of a nibble (nib = -1: the high nibble, else the
    low nibble under high nibble nib) from the node probabilities p12 of its 15 nodes: the
    quantizer of tree_to_freqs on the nibble's own tree, FREQ_TOTAL at its root, each child
    keeping at least its number of leaves (8 >> local depth); nmass (32,) work."""
    nibble_table_bits(nfreq, at, nmass, p12, nib, 12)


@kernel
def nibble_table_bits(nfreq, at, nmass, p12, nib, bits):
    """nibble_table by probabilities of bits bits (16 with mix.wide_final)."""
    nmass[1] = FREQ_TOTAL
    for j in range(1, 16):
        node = j if nib < 0 else NODE2[nib, j]
        m = nmass[j]
        leaves = np.int64(8) >> DEPTH[j]
        r = (m * np.int64(p12[node]) + (1 << (bits - 1))) >> bits
        r = min(max(r, leaves), m - leaves)
        nmass[2 * j + 1] = r
        nmass[2 * j] = m - r
    for k in range(16):
        nfreq[at + k] = np.int32(nmass[16 + k])


@kernel_inline
def _byte_contexts(u8, u16, i32, i64, offs, dims):
    """What keys the APMs at the next byte's nodes: the last two bytes c1, c2, the order-2 and
    order-3 hashes h2, h3 and sse4 = (mix.apm_order4's table, its buckets, the order-4 hash)."""
    hmask = dims[D_HMASK]
    hist, hstate = _carve(u8, offs, V_HIST), _carve(i64, offs, V_HSTATE)
    c1 = np.int64(back(hist, hstate, hmask, 1))
    c2 = np.int64(back(hist, hstate, hmask, 2))
    # Order-2 APM context: the two bytes hashed, xor the partial byte (lpaq style).
    h2 = np.int64(fmix(u64(c1 | (c2 << 8) | 0x10000)) & u64(dims[D_APM2_MASK]))
    c3 = np.int64(back(hist, hstate, hmask, 3))
    h3 = np.int64(fmix(u64(c1 | (c2 << 8) | (c3 << 16) | 0x1000000)) & u64(dims[D_APM2_MASK]))
    c4 = back(hist, hstate, hmask, 4)
    h4 = fmix(u64(c1 | (c2 << 8) | (c3 << 16)) | (c4 << u64(24)) | u64(1 << 40))
    sse4 = (_carve(u16, offs, V_APM4), _carve(i32, offs, V_AIDX4),
            np.int64(h4 & u64(dims[D_APM2_MASK])))  # fmt: skip
    return c1, c2, h2, h3, sse4


@kernel_inline
def _start_byte(u8, u64b, i64, f64, offs, dims, pdf, use_pdf):
    """Once a byte, before its first node: the rows of the weight sets of mix.sets, and the
    Mamba's node sums and expected byte from its pdf, which hash the "mamba" contexts."""
    hmask = dims[D_HMASK]
    hist, hstate = _carve(u8, offs, V_HIST), _carve(i64, offs, V_HSTATE)
    c1 = np.int64(back(hist, hstate, hmask, 1))
    c2 = np.int64(back(hist, hstate, hmask, 2))
    _set_rows(_carve(i64, offs, V_XROW), _carve(i64, offs, V_XCODES),
              _carve(i64, offs, V_XSTART), hist, hstate, _carve(u64b, offs, V_WORDS), hmask,
              c1, c2, _carve(i64, offs, V_REC))  # fmt: skip
    if use_pdf:
        tree = _carve(f64, offs, V_TREE)
        expected = node_sums(tree, pdf)
        _carve(i64, offs, V_EXPECTED)[0] = expected
        mamba_context(_carve(u64b, offs, V_CTXH), _carve(i64, offs, V_KINDS), tree, expected, c1)


@kernel_inline
def _predict_nibbles(u8, u16, u64b, i32, i64, f64, offs, dims, pdf, use_pdf, first, last):
    """Node probabilities p12 of the nibbles first..last (-1: the high nibble's 15 nodes,
    0..15: the 15 under that high nibble). The high nibble's call starts the byte: the Mamba's
    node sums and expected byte, the mass at the root. Each node's pm is computed only where
    a node is evaluated. mass follows the 2^24 split of the whole byte tree over the nodes
    evaluated: it decides which nodes are predicted in full and which second slots are looked
    up, the same way whether all 255 nodes are evaluated or only the byte's path."""
    nctx = dims[D_NCTX]
    nv = _node_views(u16, i32, i64, offs, dims)
    x, p12, pm = nv[0], _carve(i32, offs, V_P12), nv[5]
    midx = _carve(i32, offs, V_MIDX).reshape((256, nctx))
    expected, tree = _carve(i64, offs, V_EXPECTED), _carve(f64, offs, V_TREE)
    found = _carve(i64, offs, V_FOUND)
    hs = _histories(u8, i32, offs, dims)

    tbl, maps = _carve(u16, offs, V_TBL).reshape((-1, 16)), _carve(i32, offs, V_MAPS)
    ctxh, bmask = _carve(u64b, offs, V_CTXH), dims[D_BMASK]
    mass, mode = _carve(i64, offs, V_MASS), _carve(i32, offs, V_MODE)
    c1, c2, h2, h3, sse4 = _byte_contexts(u8, u16, i32, i64, offs, dims)
    xrow = _carve(i64, offs, V_XROW)
    full_mass = np.int64(FREQ_TOTAL) >> dims[D_FULL_LOG]
    slot_mass = np.int64(FREQ_TOTAL) >> dims[D_SLOT_LOG]
    if first < 0:  # once a byte: the low nibble's call finds the rows in their view
        _start_byte(u8, u64b, i64, f64, offs, dims, pdf, use_pdf)
        mass[1] = FREQ_TOTAL
        found[0] = predict_first(x, midx, tbl, maps, ctxh, bmask, hs)
    for nib in range(first, last + 1):
        if nib >= 0:
            lookup = mass[16 + nib] >= slot_mass
            found[1] = predict_second(x, midx, tbl, maps, ctxh, bmask, nib, lookup, hs)
        for j in range(1, 16):
            node = j if nib < 0 else NODE2[nib, j]
            if use_pdf:
                pm[node] = node_prob(tree, node)
            full = mass[node] >= full_mass
            mode[node] = full
            p = _node(nv, expected[0], dims, c1, c2, h2, h3, xrow, node, full, use_pdf,
                      found[0 if nib < 0 else 1], sse4)  # fmt: skip
            p12[node] = p
            split_bits(mass, node, p, dims[D_PBITS])


@kernel
def _predict(u8, u16, u64b, i32, i64, f64, offs, dims, pdf, use_pdf):
    """The next byte's table. Formats 3 and 4: all 255 nodes, freq the 256-way table (views
    of the buffers). Format 5 (dims[D_NIBBLES]): the high nibble's 15 nodes, nfreq[:16] its
    16-way table; _predict_low follows once the high nibble is known. mix.bits: the start of
    the byte alone (its first slots, weight-set rows and the Mamba's node sums); _bits
    predicts each node as its bit is coded."""
    if dims[D_NIBBLES] == BITS:  # the nodes wait for _bits; only their slots are looked up
        _start_byte(u8, u64b, i64, f64, offs, dims, pdf, use_pdf)
        tbl, slots = _carve(u16, offs, V_TBL).reshape((-1, 16)), _carve(i64, offs, V_SLOTS)
        hs = _histories(u8, i32, offs, dims)
        ctxh = _carve(u64b, offs, V_CTXH)
        _carve(i64, offs, V_FOUND)[0] = find_slots(tbl, ctxh, dims[D_BMASK], -1, slots, hs)
        return
    if dims[D_NIBBLES]:
        _predict_nibbles(u8, u16, u64b, i32, i64, f64, offs, dims, pdf, use_pdf, -1, -1)
        nibble_table_bits(_carve(i32, offs, V_NFREQ), 0, _carve(i64, offs, V_NMASS),
                          _carve(i32, offs, V_P12), -1, dims[D_PBITS])  # fmt: skip
        return
    _predict_nibbles(u8, u16, u64b, i32, i64, f64, offs, dims, pdf, use_pdf, -1, 15)
    freq, mass = _carve(i32, offs, V_FREQ), _carve(i64, offs, V_MASS)
    for b in range(256):
        freq[b] = np.int32(mass[256 + b])


@kernel
def _predict_low(u8, u16, u64b, i32, i64, f64, offs, dims, pdf, use_pdf, nib):
    """Format 5: the 15 nodes under high nibble nib, nfreq[16:] the low nibble's table (pdf
    is not read: the high nibble's call kept the Mamba's node sums)."""
    _predict_nibbles(u8, u16, u64b, i32, i64, f64, offs, dims, pdf, use_pdf, nib, nib)
    nibble_table_bits(_carve(i32, offs, V_NFREQ), 16, _carve(i64, offs, V_NMASS),
                      _carve(i32, offs, V_P12), nib, dims[D_PBITS])  # fmt: skip


@kernel
def _bits(u8, u16, u64b, i32, i64, f64, offs, dims, use_pdf, byte, words, coder, cost):
    """mix.bits: the byte's 8 nodes, each predicted in full as _predict_nibbles predicts a
    node, after _predict's start of the byte. Node d's table {2^24 - r, r} (r its p(bit = 1)
    in 24 bits) goes to nfreq[2d : 2d + 2]; its bit is byte's (byte >= 0: the encoder) or
    decoded from words (byte = -1: coder.range_decode, the decoder's state in ``coder``,
    the cost counted as decode_byte counts it). The second nibble's slots are looked up once
    its first is known. Returns the byte, or decode_byte's -1 or -2."""
    nctx = dims[D_NCTX]
    nv = _node_views(u16, i32, i64, offs, dims)
    x, p12, pm = nv[0], _carve(i32, offs, V_P12), nv[5]
    midx = _carve(i32, offs, V_MIDX).reshape((256, nctx))
    tree, found = _carve(f64, offs, V_TREE), _carve(i64, offs, V_FOUND)
    expected = _carve(i64, offs, V_EXPECTED)[0]
    hs = _histories(u8, i32, offs, dims)
    tbl, maps = _carve(u16, offs, V_TBL).reshape((-1, 16)), _carve(i32, offs, V_MAPS)
    ctxh, slots = _carve(u64b, offs, V_CTXH), _carve(i64, offs, V_SLOTS)
    mode, nfreq = _carve(i32, offs, V_MODE), _carve(i32, offs, V_NFREQ)
    c1, c2, h2, h3, sse4 = _byte_contexts(u8, u16, i32, i64, offs, dims)
    xrow = _carve(i64, offs, V_XROW)
    shift = FREQ_BITS - dims[D_PBITS]
    node = 1
    for d in range(8):
        if d == 4:
            found[1] = find_slots(tbl, ctxh, dims[D_BMASK], node - 16, slots, hs)
        seen = read_node(x, midx, tbl, maps, slots, node, node if d < 4 else NODE2_LOCAL[node],
                         hs)  # fmt: skip
        known = (seen >> 1) if dims[D_FNODE] else found[d >> 2]
        if use_pdf:
            pm[node] = node_prob(tree, node)
        mode[node] = 1
        p = _node(nv, expected, dims, c1, c2, h2, h3, xrow, node, True, use_pdf, known, sse4)
        p12[node] = p
        r = np.int32(p << shift)
        nfreq[2 * d] = FREQ_TOTAL - r
        nfreq[2 * d + 1] = r
        if byte >= 0:
            bit = (byte >> (7 - d)) & 1
        else:
            bit = range_decode(words, coder, nfreq, 2 * d, 2)
            if bit < 0:
                return -1
            cost[0] += FREQ_BITS - math.log2(nfreq[2 * d + bit])
        node = 2 * node + bit
    if byte < 0 and cost[0] > cost[1]:
        return -2
    return node - 256


@kernel_inline
def _node_views(u16, i32, i64, offs, dims):
    """The views _node works on: (x, sel, sst, sf, aidx, pm, w, wf, mstate, mmap, apm1, apm2,
    apmm, apme, apms)."""
    nin = dims[D_NIN]
    return (_carve(i32, offs, V_X).reshape((256, nin)),
            _carve(i32, offs, V_SEL).reshape((256, R_SETS)),
            _carve(i32, offs, V_SST).reshape((256, R_SETS)), _carve(i32, offs, V_SF),
            _carve(i32, offs, V_AIDX).reshape((256, N_APMS)), _carve(i32, offs, V_PM),
            _carve(i32, offs, V_W).reshape((-1, nin)),
            _carve(i32, offs, V_WF).reshape((N_FINAL_ROWS, R_SETS)),
            _carve(i64, offs, V_MSTATE), _carve(i32, offs, V_MMAP), _carve(u16, offs, V_APM1),
            _carve(u16, offs, V_APM2), _carve(u16, offs, V_APMM), _carve(u16, offs, V_APME),
            _carve(u16, offs, V_APMS))  # fmt: skip


@kernel_inline
def _node(nv, expected, dims, c1, c2, h2, h3, xrow, node, full, use_pdf, found, sse4):
    """12-bit p(bit = 1) at node: its match and Mamba inputs, the weight sets, the final
    combiner and the APMs; nv: _node_views. A node the byte is unlikely to reach (not full)
    gets the c0 weight set alone, no APM: cheaper, and it rarely costs a bit."""
    x, sel, sst, sf, aidx, pm, w, wf, mstate, mmap, apm1, apm2, apmm, apme, apms = nv
    nin, nsets = dims[D_NIN], dims[D_NSETS]
    pb = dims[D_PBITS]  # bits of the probability returned: 12, or 16 with mix.wide_final
    depth = DEPTH[node]
    col = dims[D_CCOLS]
    match_sel = 0
    if dims[D_MATCH]:
        rec, two = dims[D_RECOVER], np.int64(dims[D_MCOLS] == 4)
        e = cand_inputs(x, col, mstate, 0, mmap, 0, node, depth, rec, two)
        if two:
            cand_inputs(x, col + 2, mstate, SECOND, mmap, mmap.shape[0] >> 1, node, depth, rec,
                        two)  # fmt: skip
        col += dims[D_MCOLS]
        if mstate[1] > 0:
            lb = length_bucket(mstate[1])
            if rec and mstate[3] != 0:  # recovering: rows 97-120 by its misses
                r = min(misses(mstate[3]), 8) - 1
                match_sel = 97 + 2 * r + e if e >= 0 else 113 + r
            else:
                match_sel = 1 + 2 * lb + e if e >= 0 else 65 + lb
    sel[node, 0] = ROW_C0 + node
    sel[node, 1] = ROW_MATCH + match_sel
    sel[node, 2] = ROW_C1 + c1
    mcol = col
    if use_pdf:
        st = stretch(pm[node])
        x[node, col] = st
        x[node, col + 1] = st
        if full:
            pa, aidx[node, 2] = apm_predict(apmm, (c1 << 8) | node, st)
            x[node, col + 1] = stretch(pa)
        col += 2
        agree = (expected | 256) >> (8 - depth) == node
        e = ((expected >> (7 - depth)) & 1) + 1 if agree else 0
        if dims[D_MSEL] == 1:
            a = abs(st)
            cb = 0 if a < 256 else (1 if a < 512 else (2 if a < 1024 else 3))
            sel[node, 3] = ROW_MAMBA + 8 * (4 * e + cb) + depth
        elif dims[D_MSEL] == 2:
            mm = 0 if mstate[1] == 0 else (1 if mstate[2] == expected else 2)
            sel[node, 3] = ROW_MAMBA + 8 * (4 * e + mm) + depth
        else:
            sel[node, 3] = ROW_MAMBA + 8 * e + depth
    if dims[D_FOUND]:
        sel[node, 3 + dims[D_MAMBA]] = ROW_FOUND + 8 * min(found, MAX_FOUND) + depth
    if dims[D_C2SEL]:
        sel[node, 3 + dims[D_MAMBA] + dims[D_FOUND]] = ROW_C2 + c2
    at = 3 + dims[D_MAMBA] + dims[D_FOUND] + dims[D_C2SEL]
    for j in range(xrow.shape[0]):
        sel[node, at + j] = xrow[j] + depth
    x[node, col] = 256
    if not full:
        s = combine(w, sel[node, 0], x, node, nin)
        sst[node, 0] = s
        sf[node] = s
        return min(max(squash(s), 1), 4095) << (pb - 12)
    for j in range(nsets):
        sst[node, j] = combine(w, sel[node, j], x, node, nin)
    if dims[D_FINAL]:
        for q in range(dims[D_PROMOTE]):
            sst[node, nsets + q] = x[node, mcol + q]
        s = combine(wf, node if dims[D_FSEL] else depth, sst, node, nsets + dims[D_PROMOTE])
    else:
        acc = 0
        for j in range(nsets):
            acc += sst[node, j]
        s = acc // nsets
    sf[node] = s
    p = squash(s) << (pb - 12)
    if dims[D_APM]:
        a1, aidx[node, 0] = apm_predict_bits(apm1, (c1 << 8) | node, s, pb)
        a2, aidx[node, 1] = apm_predict_bits(apm2, h2 ^ node, s, pb)
        if dims[D_MEAPM] and use_pdf:
            if dims[D_MEAPM] == 1:
                ectx = (expected << 8) | node
            else:
                ectx = (((x[node, mcol] + 2048) >> 7) << 8) | node
            a3, aidx[node, 3] = apm_predict_bits(apme, ectx, s, pb)
            if dims[D_SSE] and dims[D_APM_MEAN]:
                p = _sse(a1 + a2 + a3, 3, apms, aidx, dims, h3, match_sel, node, s, sse4)
            elif dims[D_SSE]:
                p = _sse(p + a1 + a2 + a3, 4, apms, aidx, dims, h3, match_sel, node, s, sse4)
            else:
                p = (p + a1 + a2 + a3 + 2) >> 2
        elif dims[D_SSE] and dims[D_APM_MEAN]:
            p = _sse(a1 + a2, 2, apms, aidx, dims, h3, match_sel, node, s, sse4)
        elif dims[D_SSE]:
            p = _sse(2 * p + a1 + a2, 4, apms, aidx, dims, h3, match_sel, node, s, sse4)
        else:
            p = (2 * p + a1 + a2 + 2) >> 2
    return min(max(p, 1), (1 << pb) - 1)


@kernel
def _sse(acc, n, apms, aidx, dims, h3, match_sel, node, s, sse4):
    """The mean of n probabilities summing to acc and of two more APMs of stretch value s: an
    order-3 hashed one, and one keyed by the match model's state and the node; with
    mix.apm_order4 (sse4 = (its table, its buckets, the context)), an order-4 hashed one too."""
    pb = dims[D_PBITS]
    a3, aidx[node, 4] = apm_predict_bits(apms, h3 ^ node, s, pb)
    am, aidx[node, 5] = apm_predict_bits(
        apms, dims[D_APM2_MASK] + 1 + (match_sel << 8) + node, s, pb
    )
    if sse4[0].shape[0] > 0:
        a4, sse4[1][node] = apm_predict_bits(sse4[0], sse4[2] ^ node, s, pb)
        return (acc + a3 + am + a4 + (n + 3) // 2) // (n + 3)
    return (acc + a3 + am + (n + 2) // 2) // (n + 2)


@kernel
def _update(u8, u16, u64b, i32, i64, offs, dims, byte, trust_row, want_trust):
    """Every part learns byte on its 8 nodes; the history and the contexts move on."""
    nctx, nin, nsets = dims[D_NCTX], dims[D_NIN], dims[D_NSETS]
    hmask = dims[D_HMASK]
    x = _carve(i32, offs, V_X).reshape((256, nin))
    sel = _carve(i32, offs, V_SEL).reshape((256, R_SETS))
    sst = _carve(i32, offs, V_SST).reshape((256, R_SETS))
    sf = _carve(i32, offs, V_SF)
    aidx = _carve(i32, offs, V_AIDX).reshape((256, N_APMS))
    w = _carve(i32, offs, V_W).reshape((-1, nin))
    wf = _carve(i32, offs, V_WF).reshape((N_FINAL_ROWS, R_SETS))
    apms = _carve(u16, offs, V_APMS)
    apm1, apm2 = _carve(u16, offs, V_APM1), _carve(u16, offs, V_APM2)
    apmm, apme = _carve(u16, offs, V_APMM), _carve(u16, offs, V_APME)
    parts, mode = _carve(i64, offs, V_PARTS), _carve(i32, offs, V_MODE)
    apm4, aidx4 = _carve(u16, offs, V_APM4), _carve(i32, offs, V_AIDX4)
    apm1n, apm2n = _carve(u8, offs, V_APM1N), _carve(u8, offs, V_APM2N)
    apmsn, apm4n = _carve(u8, offs, V_APMSN), _carve(u8, offs, V_APM4N)
    lr, rate, dead = dims[D_LR], dims[D_APM_RATE], dims[D_DEAD]
    mlr = dims[D_MLR] if dims[D_MLR] else lr
    if dims[D_LR_DECAY]:
        lr = decayed_lr(lr, _carve(i64, offs, V_HSTATE)[0])
    mcol = dims[D_CCOLS] + dims[D_MCOLS]
    mhi = mcol + 2 if dims[D_MAMBA] else mcol
    half = dims[D_ROWHALF]
    wn, wfn = _carve(i32, offs, V_WN), _carve(i32, offs, V_WFN)
    node = 1
    for d in range(8):
        bit = (byte >> (7 - d)) & 1
        if want_trust:
            for j in range(nsets if mode[node] else 1):
                for k in range(nin):
                    if parts[k] >= 0:
                        trust_row[parts[k]] += abs(np.float32(w[sel[node, j], k]) * x[node, k])
        if mode[node] == 0:  # a node predicted by the c0 weight set alone
            r = sel[node, 0]
            train(w, r, x, node, nin, sst[node, 0], bit, lr, mcol, mhi, mlr, dead,
                  row_scale(wn, r, half))  # fmt: skip
            node = 2 * node + bit
            continue
        for j in range(nsets):
            r = sel[node, j]
            train(w, r, x, node, nin, sst[node, j], bit, lr, mcol, mhi, mlr, dead,
                  row_scale(wn, r, half))  # fmt: skip
        if dims[D_FINAL]:
            frow = node if dims[D_FSEL] else d
            nf = nsets + dims[D_PROMOTE]
            train(wf, frow, sst, node, nf, sf[node], bit, dims[D_FLR], 0, 0, 0, dead,
                  row_scale(wfn, frow, half))  # fmt: skip
        if dims[D_APM] and dims[D_ACOUNT]:
            apm_update_counted(apm1, apm1n, aidx[node, 0], bit, rate + dims[D_ACOUNT] - 1)
            apm_update_counted(apm2, apm2n, aidx[node, 1], bit, rate + dims[D_ACOUNT] - 1)
            if dims[D_SSE]:
                apm_update_counted(apms, apmsn, aidx[node, 4], bit, rate + dims[D_ACOUNT] - 1)
                apm_update_counted(apms, apmsn, aidx[node, 5], bit, rate + dims[D_ACOUNT] - 1)
                if apm4.shape[0] > 0:
                    apm_update_counted(apm4, apm4n, aidx4[node], bit, rate + dims[D_ACOUNT] - 1)
        elif dims[D_APM]:
            apm_update(apm1, aidx[node, 0], bit, rate)
            apm_update(apm2, aidx[node, 1], bit, rate)
            if dims[D_SSE]:
                apm_update(apms, aidx[node, 4], bit, rate)
                apm_update(apms, aidx[node, 5], bit, rate)
                if apm4.shape[0] > 0:
                    apm_update(apm4, aidx4[node], bit, rate)
        if dims[D_MAMBA]:
            apm_update(apmm, aidx[node, 2], bit, rate)
            if dims[D_MEAPM]:
                apm_update(apme, aidx[node, 3], bit, rate)
        node = 2 * node + bit
    if want_trust:
        total = np.float32(0.0)
        for q in range(trust_row.shape[0]):
            total += trust_row[q]
        if total > 0:
            for q in range(trust_row.shape[0]):
                trust_row[q] /= total

    ctxh = _carve(u64b, offs, V_CTXH)
    update_contexts(
        _carve(u16, offs, V_TBL).reshape((-1, 16)), _carve(i32, offs, V_MAPS),
        _carve(i32, offs, V_MIDX).reshape((256, nctx)), ctxh, dims[D_BMASK], byte,
        dims[D_CLIMIT], dims[D_SCHEDULE], dims[D_MLIMIT], _histories(u8, i32, offs, dims),
    )  # fmt: skip
    hist, hstate = _carve(u8, offs, V_HIST), _carve(i64, offs, V_HSTATE)
    mstate = _carve(i64, offs, V_MSTATE)
    if dims[D_MATCH]:
        mmap = _carve(i32, offs, V_MMAP)
        rec, two = dims[D_RECOVER], np.int64(dims[D_MCOLS] == 4)
        update_cand_map(mmap, 0, mstate, 0, byte, dims[D_MLIMIT], rec, two)
        if two:
            update_cand_map(mmap, mmap.shape[0] >> 1, mstate, SECOND, byte, dims[D_MLIMIT], rec,
                            two)  # fmt: skip
    words = _carve(u64b, offs, V_WORDS)
    history_push(hist, hstate, words, hmask, byte)
    if dims[D_MATCH]:
        rec = dims[D_RECOVER]
        cand_advance(_carve(i32, offs, V_MT), mstate, 0, hist, hstate, hmask, dims[D_MINLEN], 1,
                     rec)  # fmt: skip
        if dims[D_MCOLS] == 4:
            n2 = dims[D_MINLEN2]
            cand_advance(_carve(i32, offs, V_MT2), mstate, SECOND, hist, hstate, hmask, n2, n2,
                         rec)  # fmt: skip
    kinds = _carve(i64, offs, V_KINDS)
    context_hashes(ctxh, _carve(u64b, offs, V_ORDERS), hist, hstate, words, kinds, hmask,
                   _carve(u16, offs, V_IND))  # fmt: skip
    match_context(ctxh, kinds, mstate, dims[D_MCTX2])
    records = _carve(i64, offs, V_REC)
    if records.shape[0] > 0:
        record_push(records, hist, hstate, hmask)
        record_context(ctxh, kinds, records, hist, hstate, hmask)


@kernel
def prime(u8, u16, u64b, i32, i64, f64, offs, dims, pdf, use_pdf):
    """The first byte's table: contexts of the empty history, then a prediction."""
    context_hashes(
        _carve(u64b, offs, V_CTXH), _carve(u64b, offs, V_ORDERS), _carve(u8, offs, V_HIST),
        _carve(i64, offs, V_HSTATE), _carve(u64b, offs, V_WORDS), _carve(i64, offs, V_KINDS),
        dims[D_HMASK], _carve(u16, offs, V_IND),
    )  # fmt: skip
    match_context(_carve(u64b, offs, V_CTXH), _carve(i64, offs, V_KINDS),
                   _carve(i64, offs, V_MSTATE), dims[D_MCTX2])  # fmt: skip
    records = _carve(i64, offs, V_REC)
    if records.shape[0] > 0:
        record_context(_carve(u64b, offs, V_CTXH), _carve(i64, offs, V_KINDS), records,
                       _carve(u8, offs, V_HIST), _carve(i64, offs, V_HSTATE),
                       dims[D_HMASK])  # fmt: skip
    _predict(u8, u16, u64b, i32, i64, f64, offs, dims, pdf, use_pdf)


@kernel
def run(u8, u16, u64b, i32, i64, f64, offs, dims, data, pdfs, use_pdf, freqs, p, trust,
        want_trust, coder):  # fmt: skip
    """For each byte i of data: freqs[i] = the current table, p[i] = its probability of data[i];
    learn data[i]; predict the next byte with the Mamba's pdf row pdfs[i] (if use_pdf).
    Format 5: freqs[i] (32,) holds the high nibble's table, then the low nibble's under the
    byte's high nibble, and p[i] the product of the byte's two nibble probabilities; with
    mix.bits, freqs[i] (16,) the 8 bits' tables and p[i] their product. coder: _bits's
    (words, state, cost), not read when encoding (a kernel allocates nothing)."""
    freq, nfreq = _carve(i32, offs, V_FREQ), _carve(i32, offs, V_NFREQ)
    nibbles = dims[D_NIBBLES] != 0
    for i in range(data.shape[0]):
        byte = np.int64(data[i])
        pdf = pdfs[i if use_pdf else 0]
        if dims[D_NIBBLES] == BITS:
            _bits(u8, u16, u64b, i32, i64, f64, offs, dims, use_pdf, byte, *coder)
            q = 1.0
            for k in range(16):
                freqs[i, k] = nfreq[k]
            for d in range(8):
                q *= np.float64(nfreq[2 * d + ((byte >> (7 - d)) & 1)]) / FREQ_TOTAL
            p[i] = q
        elif nibbles:
            hi, lo = byte >> 4, byte & 15
            _predict_low(u8, u16, u64b, i32, i64, f64, offs, dims, pdf, use_pdf, hi)
            for k in range(32):
                freqs[i, k] = nfreq[k]
            p[i] = np.float64(nfreq[hi]) * np.float64(nfreq[16 + lo]) / FREQ_TOTAL / FREQ_TOTAL
        else:
            for b in range(256):
                freqs[i, b] = freq[b]
            p[i] = np.float64(freq[byte]) / FREQ_TOTAL
        _update(u8, u16, u64b, i32, i64, offs, dims, byte, trust[i], want_trust)
        _predict(u8, u16, u64b, i32, i64, f64, offs, dims, pdf, use_pdf)


@kernel
def step(u8, u16, u64b, i32, i64, f64, f32, offs, dims):
    """The decoder's per-byte call, its inputs in the buffers (fewer arguments to dispatch than
    run's): learn the byte in view inbyte, predict the next with the Mamba's pdf in inpdf
    (format 5: the next byte's high nibble)."""
    byte = _carve(i64, offs, V_INBYTE)[0]
    _update(u8, u16, u64b, i32, i64, offs, dims, byte, _carve(f32, offs, V_TRUST1), False)
    _predict(
        u8, u16, u64b, i32, i64, f64, offs, dims, _carve(f32, offs, V_INPDF), dims[D_MAMBA] != 0
    )


@kernel
def step_low(u8, u16, u64b, i32, i64, f64, f32, offs, dims):
    """Format 5, the decoder's call between a byte's two nibbles: the low nibble's table under
    the high nibble in view inbyte."""
    _predict_low(u8, u16, u64b, i32, i64, f64, offs, dims, _carve(f32, offs, V_INPDF),
                 dims[D_MAMBA] != 0, _carve(i64, offs, V_INBYTE)[0])  # fmt: skip


@kernel
def decode_byte(u8, u16, u64b, i32, i64, f64, f32, offs, dims, words, coder, cost):
    """Format 5, the decoder's call per byte before the byte is learned: its high nibble
    decoded (coder.range_decode, the decoder's state in ``coder``) under the table of the
    last step, the low nibble's table, the low nibble decoded. Returns the byte; -1 where
    the words cannot come from these tables, -2 once the bytes decoded cost more bits
    (cost[0], each byte's 48 - log2 of its two frequencies) than the words hold (cost[1]).
    mix.bits: the byte's 8 bits decoded as _bits predicts their nodes."""
    if dims[D_NIBBLES] == BITS:
        return _bits(u8, u16, u64b, i32, i64, f64, offs, dims, dims[D_MAMBA] != 0, -1, words,
                     coder, cost)  # fmt: skip
    nfreq = _carve(i32, offs, V_NFREQ)
    high = range_decode(words, coder, nfreq, 0, 16)
    if high < 0:
        return -1
    _predict_low(u8, u16, u64b, i32, i64, f64, offs, dims, _carve(f32, offs, V_INPDF),
                 dims[D_MAMBA] != 0, high)  # fmt: skip
    low = range_decode(words, coder, nfreq, 16, 16)
    if low < 0:
        return -1
    cost[0] += 2 * FREQ_BITS - math.log2(nfreq[high]) - math.log2(nfreq[16 + low])
    if cost[0] > cost[1]:
        return -2
    return (high << 4) | low


@kernel
def decode_run(u8, u16, u64b, i32, i64, f64, f32, offs, dims, words, coder, cost, out, start,
               stop):  # fmt: skip
    """Format 5 (nibbles or bits) without the Mamba: out[start:stop] decoded and learned,
    decode_byte then step for each byte. Returns 0, or decode_byte's error once it gives one."""
    inbyte = _carve(i64, offs, V_INBYTE)
    for i in range(start, stop):
        byte = decode_byte(u8, u16, u64b, i32, i64, f64, f32, offs, dims, words, coder, cost)
        if byte < 0:
            return byte
        out[i] = byte
        inbyte[0] = byte
        step(u8, u16, u64b, i32, i64, f64, f32, offs, dims)
    return 0
