"""Context models: per context, the byte's 255 node counters in two hashed nibble slots.

Arrays (S = 2^ctx_log slots shared by all context models, C context models, NIN combiner inputs):
    tbl (S, 16) uint16     a slot: [0] checksum, [1..15] counters of one nibble's 15 nodes
                           (local node j = 1, 2..3, 4..7, 8..15, paq style); buckets of 4
                           slots, one cache-line pair
    maps (C * 4096,) int32 one adaptive map per context model (counters.map_index -> p)
    ctxh (C,) uint64       the context hashes of the next byte (history.context_hashes)
    x (256, NIN) int32     combiner inputs per node; model i writes column i
    midx (256, C) int32    adaptive-map entry each model used at each node (for the update)
With the bit histories (mix.histories), hs = (hst, hmaps, hidx, hcol, last, runs, ccol, dcol,
dmode, rcol, rmaps, ridx, states, bh, bcol, bmaps, bidx, half):
    hst (S, 16) uint8      beside each slot, its nodes' bit histories (history_next); with
                           last, [0] beside a first-nibble slot: the byte last seen there
    hmaps (C * B * 128,) int32 per model B = 1 (3 with last, 12 with runs) adaptive maps from a
                           bit history to p: with last, the map by whether the last byte's
                           path runs through the node, and which way it goes on from there;
                           with runs, also by the last byte's run (RUN_BUCKET); with
                           mix.history_depth, B times DEPTH_BUCKETS maps, also by the node's
                           depth // 2; with mix.states, 256 entries a map (STATE_SLOTS)
    hidx (256, C) int32    the history-map entry each model used at each node; row 0 (no node
                           has it), with last: each model's last byte in its context | its run
                           << 8, or -1
    hcol                   x column of model 0's history input (C; 0: no histories)
    last                   whether the slots keep their last byte (mix.last_byte)
    runs (S,) uint8        with mix.runs, beside each first-nibble slot: how many times in a
                           row (capped at 15) its last byte came again; empty without
    ccol, dcol, dmode      x columns of model 0's mix.conf_inputs and det_inputs (0: none),
                           det_inputs' mode
    rcol, rmaps, ridx      with mix.run_inputs: x column of model 0's run input (0: none),
                           (C * RUN_ENTRIES (* 3),) int32 adaptive maps, (256, C) int32 the entry
                           each model used at each node (-1: none)
    states                 bit 0, mix.states: hst holds a state of states.py's table (counts
                           that forget), not history_next's raw bits; bit 1,
                           mix.history_depth
    bh, bcol, bmaps, bidx  with mix.byte_history: (S, 2) uint8 beside each first-nibble slot,
                           the two distinct bytes seen there before its last one, the most
                           recent first (equal to a newer one: not known yet); x column of
                           model 0's byte-history input (0: none); (C * BYTE_ENTRIES,) int32
                           adaptive maps; (256, C) int32 the entry each model used (-1: none)
    half                   mix.half_inputs: the history and run inputs shift right by 1

The first nibble of the byte lives in slot key(h); the second in key(h, first nibble). To predict
all 255 nodes a model reads its first slot and the 16 possible second slots (read only; a slot
not in the table gives the never-seen state 0; loop.py skips the lookups of second nibbles
the byte is unlikely to take). Only the update creates slots: in a full bucket
it replaces the slot whose node-1 counter has the lowest count (the least used one). The 16-bit
checksum detects all but 1/16384 of the collisions between contexts sharing a bucket.
"""

import numpy as np

from ..jit import kernel, kernel_inline
from .counters import COUNTER_RATES, MAP_SIZE, counter_next, map_index, map_p, map_update, stretch
from .history import M1, fmix
from .states import N0, N1, NEXT

u64 = np.uint64
BUCKET = 4  # slots per bucket
HISTORY_STATES = 128  # bit histories of a node: 0, or a leading 1 and up to 6 bits
STATE_SLOTS = 256  # with mix.states, map entries per state map (states.N_STATES used)
DEPTH_BUCKETS = 4  # with mix.history_depth, the history maps also by depth // 2
# A run of the last byte, in RUNS buckets: new, once again, 2-3 times, 4 or more.
RUN_BUCKET = np.array([0, 1, 2, 2] + [3] * 12, np.int64)
RUNS = 4
# mix.run_inputs: per model, an adaptive map by the last byte's run (0..15), the depth and the
# bit the last byte takes at the node; run_inputs 2: three, by _history_kind of the node.
RUN_ENTRIES = 16 * 8 * 2
# mix.byte_history: per model, an adaptive map by the way each of the slot's last three
# distinct bytes goes at the node (none, 0 or 1: 27 patterns) and the depth; its stretch
# enters at half (BYTE_SHIFT): at full it cost 0.0024 bits/byte (the sum over four 256 KB
# prefixes), keyed by the last byte's run too a further 0.0060
# (benchmarks/sweep-2026-12-05-bytes.md).
BYTE_ENTRIES = 27 * 8
BYTE_SHIFT = 1
# A model's last byte packed with the rest of its slot's byte history (the `last` of _read):
# the byte in bits 0-7, its run in 8-11, the older distinct bytes, each with a leading 1
# where known (else 0), in 12-20 and 21-29.
RUN_MASK = 15
S32 = u64(32)

# NODE2[nib, j]: byte-tree node of local node j (1..15) of the second-nibble slot for nib.
NODE2 = np.zeros((16, 16), np.int64)
for _nib in range(16):
    for _j in range(1, 16):
        _d = _j.bit_length() - 1
        NODE2[_nib, _j] = ((16 + _nib) << _d) + _j - (1 << _d)
# NODE_DEPTH[node]: bits of the byte known at node 1..255.
NODE_DEPTH = np.array([0] + [n.bit_length() - 1 for n in range(1, 256)], np.int64)
# NODE2_LOCAL[node]: local index in its second-nibble slot of a byte-tree node 16..255.
NODE2_LOCAL = np.zeros(256, np.int64)
for _nib in range(16):
    for _j in range(1, 16):
        NODE2_LOCAL[NODE2[_nib, _j]] = _j


@kernel_inline
def slot_key(h, nib):
    """Hash of a slot: nib = -1 for the first nibble, else the first nibble's value."""
    return fmix(h + u64(nib + 1) * M1)


@kernel
def find_slot(tbl, key, bmask):
    """Index of the slot with key's checksum in key's bucket, or -1."""
    base = np.int64((key >> S32) & u64(bmask)) * BUCKET
    chk = np.uint16(key & u64(0xFFFF))
    for s in range(base, base + BUCKET):
        if tbl[s, 0] == chk:
            return s
    return -1


@kernel
def make_slot(tbl, key, bmask):
    """find_slot, or a fresh slot replacing the least used one of the bucket."""
    base = np.int64((key >> S32) & u64(bmask)) * BUCKET
    chk = np.uint16(key & u64(0xFFFF))
    victim = base
    low = 16
    for s in range(base, base + BUCKET):
        if tbl[s, 0] == chk:
            return s
        n = tbl[s, 1] & 15
        if n < low:
            low = n
            victim = s
    tbl[victim, :] = 0
    tbl[victim, 0] = chk
    return victim


@kernel
def history_next(h, bit):
    """A node's bit history (uint8) after bit: a leading 1 then the last bits seen, at most
    6 of them; 0 = none yet."""
    h = np.int64(h)
    if h == 0:
        h = 1
    h = (h << 1) | bit
    if h >= 128:
        h = (h & 63) | 64
    return np.uint8(h)


@kernel
def history_map_init(hmaps):
    """Each history's map entry starts at (ones + 1/2) / (bits + 1) of the bits it holds."""
    for e in range(hmaps.size):
        h = e % HISTORY_STATES
        p12 = 2048
        if h >= 2:
            bits = 0
            ones = 0
            while h > 1:
                ones += h & 1
                bits += 1
                h >>= 1
            p12 = (4096 * (2 * ones + 1)) // (2 * bits + 2)
        hmaps[e] = np.int32(p12 << 19)


def state_map_init(hmaps):
    """With mix.states: each state's map entry starts at (n1 + 1/2) / (n0 + n1 + 1) of its
    counts (1/2 for state 0 and the unused entries past states.N_STATES)."""
    e = np.arange(hmaps.size) % STATE_SLOTS
    n0, n1 = N0[e], N1[e]
    p12 = (4096 * (2 * n1 + 1)) // (2 * (n0 + n1) + 2)
    hmaps[:] = (p12 << 19).astype(np.int32)


@kernel_inline
def _read(x, midx, maps, i, node, state, hs, h, last):
    """Model i's inputs at node: its counter state through its adaptive map; with the bit
    histories (hs.hcol > 0), also its bit history h through its history map, in column
    hcol + i; with hs.last, the map chosen by the context's last byte (-1: none). The inputs
    of mix.conf_inputs, det_inputs and run_inputs follow in their columns (hs[6], hs[7],
    hs[9]; 0: off), each 0 where what it reads was never seen. Inlined, like loop._node: a
    call passed hs's arrays as about a hundred scalar arguments, 480 times a byte."""
    m = i * MAP_SIZE + map_index(state)
    midx[node, i] = m
    x[node, i] = stretch(map_p(maps, m))
    hmaps, hidx, hcol = hs[1], hs[2], hs[3]
    if hcol > 0:
        states = hs[12] & 1
        hm = i  # the model's history map, refined below by way, run and depth
        way = 0
        depth = NODE_DEPTH[node]
        if hs[4]:
            byte = last & 255
            if last >= 0 and (byte | 256) >> (8 - depth) == node:
                way = 1 + ((byte >> (7 - depth)) & 1)
            hm = 3 * i + way
            if hs[5].shape[0] > 0:
                run = RUN_BUCKET[(last >> 8) & RUN_MASK] if last >= 0 else 0
                hm = hm * RUNS + run
        if hs[12] & 2:
            hm = hm * DEPTH_BUCKETS + (depth >> 1)
        e = hm * (STATE_SLOTS if states else HISTORY_STATES) + np.int64(h)
        hidx[node, i] = e
        p = map_p(hmaps, e)
        st = stretch(p)
        x[node, hcol + i] = st >> hs[17]
        if hs[6] > 0:  # the probability itself: sure histories stand out more than stretched
            x[node, hs[6] + i] = (p - 2048) >> 1 if h != 0 else 0
        if hs[7] > 0:
            x[node, hs[7] + i] = _deterministic(h, p, st, hs[8], states)
        if hs[9] > 0:
            r = -1
            if way > 0:  # the last byte's path runs through the node: the bit it expects
                r = ((((last >> 8) & RUN_MASK) * 8 + depth) << 1) + way - 1
                stride = hs[10].shape[0] // hs[11].shape[1]
                if stride > RUN_ENTRIES:  # run_inputs 2: also by what the node has seen
                    r += RUN_ENTRIES * _history_kind(h, states)
                r += i * stride
                x[node, hs[9] + i] = stretch(map_p(hs[10], r)) >> hs[17]
            else:
                x[node, hs[9] + i] = 0
            hs[11][node, i] = r
        if hs[14] > 0:
            _read_bytes(x, hs, i, node, depth, way, last)


@kernel_inline
def _read_bytes(x, hs, i, node, depth, way, last):
    """Model i's byte-history input at node: its map by the ways the slot's three distinct
    bytes go there (``last`` packs them, RUN_MASK's comment), 0 where none passes the node."""
    w2 = 0
    w3 = 0
    if last >= 0:
        b2 = (last >> 12) & 511
        b3 = (last >> 21) & 511
        if b2 >> (8 - depth) == node:
            w2 = 1 + ((b2 >> (7 - depth)) & 1)
        if b3 >> (8 - depth) == node:
            w3 = 1 + ((b3 >> (7 - depth)) & 1)
    pattern = 9 * way + 3 * w2 + w3
    e = -1
    if pattern > 0:
        e = i * BYTE_ENTRIES + pattern * 8 + depth
        x[node, hs[14] + i] = stretch(map_p(hs[15], e)) >> BYTE_SHIFT
    else:
        x[node, hs[14] + i] = 0
    hs[16][node, i] = e


@kernel_inline
def _history_kind(h, states=0):
    """0: bit history h is empty, 1: it holds one bit value only, 2: both. With mix.states
    (states > 0), h is a state of states.py: one bit value only where one count is 0."""
    h = np.int64(h)
    if states:
        if h == 0:
            return 0
        return 1 if N0[h] == 0 or N1[h] == 0 else 2
    if h < 2:
        return 0
    top = 1
    while top * 2 <= h:
        top *= 2
    bits = h - top
    return 1 if bits == 0 or bits == top - 1 else 2


@kernel_inline
def _deterministic(h, p, st, mode, states=0):
    """Where bit history h holds one bit value only: mode 1 the history's stretch st, mode 2
    its probability p of that value, signed by it (in 1/8192), mode 3 an eighth of mode 2;
    else 0. Such a context has never been contradicted, which a mix of counters alone cannot
    tell. Mode 2 at full was too loud beside the counters (sweep-2026-12-07-contexts.md)."""
    if _history_kind(h, states) != 1:
        return 0
    if mode == 1:
        return st
    shift = 1 if mode == 2 else 4
    one = N1[np.int64(h)] > 0 if states else np.int64(h) & 1 == 1
    return p >> shift if one else -((4096 - p) >> shift)


@kernel_inline
def _history(hs, s, j):
    """Slot s's bit history at local node j (0 without histories: hst is then empty)."""
    return hs[0][s, j] if hs[3] > 0 else np.uint8(0)


@kernel
def predict_first(x, midx, tbl, maps, ctxh, bmask, hs):
    """Inputs x[1..15, i] of every context model i: the first nibble's nodes. Returns how many
    models have seen their context. hs: (hst, hmaps, hidx, hcol), the bit histories."""
    found = 0
    for i in range(ctxh.shape[0]):
        s = _first_slot(tbl, ctxh, i, bmask, hs)
        found += s >= 0
        last = _last(hs, i)
        for node in range(1, 16):
            _read_slot(x, midx, tbl, maps, i, node, node, s, hs, last)
    return found


@kernel_inline
def _first_slot(tbl, ctxh, i, bmask, hs):
    """Model i's first-nibble slot (-1: not in the table). With hs.last, its last byte packed
    with the rest of its byte history (RUN_MASK's comment; -1: none) goes to row 0 of hidx,
    where the second nibble's reads find it."""
    s = find_slot(tbl, slot_key(ctxh[i], -1), bmask)
    if hs[4]:
        last = -1
        if s >= 0 and tbl[s, 1] & 15 > 0:
            last = np.int64(hs[0][s, 0])
            if hs[5].shape[0] > 0:
                last |= np.int64(hs[5][s]) << 8
            if hs[14] > 0:
                last |= _older_bytes(hs[13], s, last & 255)
        hs[2][0, i] = last
    return s


@kernel_inline
def _last(hs, i):
    """Model i's packed last byte that _first_slot kept (-1 without hs.last)."""
    return np.int64(hs[2][0, i]) if hs[4] else np.int64(-1)


@kernel_inline
def _read_slot(x, midx, tbl, maps, i, node, j, s, hs, last):
    """Model i's inputs at byte-tree node from local node j of its slot s (-1: a context never
    seen, whose state and history are 0)."""
    state = np.int64(tbl[s, j]) if s >= 0 else np.int64(0)
    h = _history(hs, s, j) if s >= 0 else np.uint8(0)
    _read(x, midx, maps, i, node, state, hs, h, last)


@kernel_inline
def _older_bytes(bh, s, byte):
    """Slot s's two older distinct bytes packed for ``last`` (RUN_MASK's comment), each with
    a leading 1 where it is known (differs from every newer one)."""
    b2 = np.int64(bh[s, 0])
    b3 = np.int64(bh[s, 1])
    packed = 0
    if b2 != byte:
        packed |= (b2 | 256) << 12
        if b3 != b2 and b3 != byte:
            packed |= (b3 | 256) << 21
    return packed


@kernel
def predict_second(x, midx, tbl, maps, ctxh, bmask, nib, lookup, hs):
    """Inputs of every context model at the 15 nodes below first nibble nib; without lookup
    (a subtree too unlikely to be worth a cache miss) every model gives its never-seen input.
    Returns how many models have seen their context followed by nib."""
    found = 0
    for i in range(ctxh.shape[0]):
        s = find_slot(tbl, slot_key(ctxh[i], nib), bmask) if lookup else -1
        found += s >= 0
        last = _last(hs, i)
        for j in range(1, 16):
            _read_slot(x, midx, tbl, maps, i, NODE2[nib, j], j, s, hs, last)
    return found


@kernel
def find_slots(tbl, ctxh, bmask, nib, slots, hs):
    """mix.bits: each model's slot, slots (C,) int64 (-1: not in the table), of the first
    nibble (nib = -1; also its last byte, as predict_first keeps it) or of the second under
    first nibble nib. Returns how many were found."""
    found = 0
    for i in range(ctxh.shape[0]):
        s = (
            _first_slot(tbl, ctxh, i, bmask, hs)
            if nib < 0
            else find_slot(tbl, slot_key(ctxh[i], nib), bmask)
        )
        slots[i] = s
        found += s >= 0
    return found


@kernel
def read_node(x, midx, tbl, maps, slots, node, j, hs):
    """mix.bits: every model's inputs at byte-tree node alone, from local node j of its slot
    in slots (find_slots): the bit coding evaluates only the byte's 8 nodes. Returns how
    many models have seen the node (its counter has a count)."""
    seen = 0
    for i in range(slots.shape[0]):
        s = slots[i]
        seen += s >= 0 and tbl[s, j] & 15 > 0
        _read_slot(x, midx, tbl, maps, i, node, j, s, hs, _last(hs, i))
    return seen


@kernel
def _make_slot(tbl, key, bmask, hst, histories):
    """make_slot; a fresh slot's bit histories are cleared too (a slot in use always has a
    count at its local node 1, which its first update sets)."""
    s = make_slot(tbl, key, bmask)
    if histories and tbl[s, 1] == 0:
        hst[s, :] = 0
    return s


@kernel_inline
def _push_byte(bh, s, used, last, byte):
    """Slot s's older distinct bytes after byte follows its last byte (a list moved to the
    front: byte leaves it, last enters first). A fresh slot knows none: both equal byte."""
    if not used:
        bh[s, 0] = np.uint8(byte)
        bh[s, 1] = np.uint8(byte)
    elif byte != last:
        if byte != bh[s, 0]:
            bh[s, 1] = bh[s, 0]
        bh[s, 0] = last


@kernel
def update_contexts(tbl, maps, midx, ctxh, bmask, byte, counter_limit, schedule, map_limit, hs):
    """Learn byte on its 8 nodes: each model's adaptive map at the entry it used, and its
    counters at the rates of schedule (counters.COUNTER_RATES), creating the two slots if
    needed; with the bit histories, each model's history map and the node's history."""
    rates = COUNTER_RATES[schedule]
    hst, hmaps, hidx, histories = hs[0], hs[1], hs[2], hs[3] > 0
    for i in range(ctxh.shape[0]):
        h = ctxh[i]
        s = _make_slot(tbl, slot_key(h, -1), bmask, hst, histories)
        if hs[4]:  # before the second slot is made, which may take this one's place
            used = tbl[s, 1] & 15 > 0  # the slot has a last byte
            if hs[5].shape[0] > 0:
                again = used and hst[s, 0] == byte
                hs[5][s] = min(np.int64(hs[5][s]) + 1, 15) if again else 0
            if hs[14] > 0:
                _push_byte(hs[13], s, used, hst[s, 0], byte)
            hst[s, 0] = np.uint8(byte)
        node = 1
        for k in range(8):
            if k == 4:
                s = _make_slot(tbl, slot_key(h, node - 16), bmask, hst, histories)
            bit = (byte >> (7 - k)) & 1
            map_update(maps, midx[node, i], bit, map_limit)
            j = node if k < 4 else NODE2_LOCAL[node]
            tbl[s, j] = counter_next(tbl[s, j], bit, counter_limit, rates)
            if histories:
                map_update(hmaps, hidx[node, i], bit, map_limit)
                if hs[12] & 1:
                    hst[s, j] = NEXT[hst[s, j], bit]
                else:
                    hst[s, j] = history_next(hst[s, j], bit)
                if hs[9] > 0 and hs[11][node, i] >= 0:
                    map_update(hs[10], hs[11][node, i], bit, map_limit)
                if hs[14] > 0 and hs[16][node, i] >= 0:
                    map_update(hs[15], hs[16][node, i], bit, map_limit)
            node = 2 * node + bit
