"""Context models: per context, the byte's 255 node counters in two hashed nibble slots.

Arrays (S = 2^ctx_log slots shared by all context models, C context models, NIN combiner inputs):
    tbl (S, 16) uint16     a slot: [0] checksum, [1..15] counters of one nibble's 15 nodes
                           (local node j = 1, 2..3, 4..7, 8..15, paq style); buckets of 4
                           slots, one cache-line pair
    maps (C * 4096,) int32 one adaptive map per context model (counters.map_index -> p)
    ctxh (C,) uint64       the context hashes of the next byte (history.context_hashes)
    x (256, NIN) int32     combiner inputs per node; model i writes column i
    midx (256, C) int32    adaptive-map entry each model used at each node (for the update)

The first nibble of the byte lives in slot key(h); the second in key(h, first nibble). To predict
all 255 nodes a model reads its first slot and the 16 possible second slots (read only; a slot
not in the table gives the never-seen state 0; loop.py skips the lookups of second nibbles
the byte is unlikely to take). Only the update creates slots: in a full bucket
it replaces the slot whose node-1 counter has the lowest count (the least used one). The 16-bit
checksum detects all but 1/16384 of the collisions between contexts sharing a bucket.
"""

import numpy as np

from ..jit import kernel, kernel_inline
from .counters import MAP_SIZE, counter_next, map_index, map_p, map_update, stretch
from .history import M1, fmix

u64 = np.uint64
BUCKET = 4  # slots per bucket
S32 = u64(32)

# NODE2[nib, j]: byte-tree node of local node j (1..15) of the second-nibble slot for nib.
NODE2 = np.zeros((16, 16), np.int64)
for _nib in range(16):
    for _j in range(1, 16):
        _d = _j.bit_length() - 1
        NODE2[_nib, _j] = ((16 + _nib) << _d) + _j - (1 << _d)
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
def _read(x, midx, maps, i, node, state):
    m = i * MAP_SIZE + map_index(state)
    midx[node, i] = m
    x[node, i] = stretch(map_p(maps, m))


@kernel
def predict_first(x, midx, tbl, maps, ctxh, bmask):
    """Inputs x[1..15, i] of every context model i: the first nibble's nodes. Returns how many
    models have seen their context."""
    found = 0
    for i in range(ctxh.shape[0]):
        s = find_slot(tbl, slot_key(ctxh[i], -1), bmask)
        found += s >= 0
        for node in range(1, 16):
            _read(x, midx, maps, i, node, tbl[s, node] if s >= 0 else 0)
    return found


@kernel
def predict_second(x, midx, tbl, maps, ctxh, bmask, nib, lookup):
    """Inputs of every context model at the 15 nodes below first nibble nib; without lookup
    (a subtree too unlikely to be worth a cache miss) every model gives its never-seen input.
    Returns how many models have seen their context followed by nib."""
    found = 0
    for i in range(ctxh.shape[0]):
        s = find_slot(tbl, slot_key(ctxh[i], nib), bmask) if lookup else -1
        found += s >= 0
        for j in range(1, 16):
            _read(x, midx, maps, i, NODE2[nib, j], tbl[s, j] if s >= 0 else 0)
    return found


@kernel
def update_contexts(tbl, maps, midx, ctxh, bmask, byte, counter_limit, map_limit):
    """Learn byte on its 8 nodes: each model's adaptive map at the entry it used, and its
    counters (creating the two slots if needed)."""
    for i in range(ctxh.shape[0]):
        h = ctxh[i]
        s = make_slot(tbl, slot_key(h, -1), bmask)
        node = 1
        for k in range(8):
            if k == 4:
                s = make_slot(tbl, slot_key(h, node - 16), bmask)
            bit = (byte >> (7 - k)) & 1
            map_update(maps, midx[node, i], bit, map_limit)
            j = node if k < 4 else NODE2_LOCAL[node]
            tbl[s, j] = counter_next(tbl[s, j], bit, counter_limit)
            node = 2 * node + bit
