"""Match model: the last earlier occurrence of the recent bytes predicts the byte after it.

Arrays (T = 2^match_log table entries, H history bytes):
    mt (T,) int32          hash of the last match_min bytes -> the byte count t right after
                           their last occurrence (0: none)
    mt2 (T,) int32         with mix.match_min2, the same for the last match_min2 bytes
    mstate (3,) int64      [0] t of the predicted byte in the history, [1] match length in
                           bytes (0: no match), [2] the predicted (expected) byte; with
                           mix.match_recover or mix.match_min2 (MSTATE entries): [3] the
                           candidate's misses over its last 16 bytes (bit i: a miss i + 1
                           bytes ago), and the second candidate's [0..3] at SECOND
    mmap (64,) int32       adaptive map (counters.map_*) keyed by length bucket (32) x the
                           expected bit (2): how often the expected bit is right; with the
                           options, one map per candidate of map_entries entries, keyed also
                           by the misses (REC_BUCKETS) and by the other candidate (3: none,
                           expects the same byte, expects another)

A match is found by hash, then verified by comparing the history backwards (so its length is
real, and a hash collision gives none); it extends while the bytes keep agreeing. Its two
inputs at a node on the expected byte's prefix path are stretch(mmap[bucket, bit]) and the
expected bit's sign times the bucket; elsewhere both are 0 (the match says nothing there).

Recovery (mix.match_recover = r > 0): on a miss the candidate is kept, its pointer moves past
the byte that missed (as if it was replaced), its length restarts at 1 and the miss enters
[3]; it is dropped once r of its last 16 bytes missed. While it recovers, a candidate found
by the hash replaces it if it verifies longer. The second candidate (mix.match_min2 = n > 0)
is found by a hash of n bytes and must verify at least n; it follows the same rules.
"""

import numpy as np

from ..jit import kernel, kernel_inline
from .counters import map_p, map_update, stretch
from .history import K_MATCHED, M1, fmix, tagged

u64 = np.uint64
MAX_LEN = 65535
MAX_VERIFY = 1024  # longest backward comparison when a match starts
MSTATE = 8  # mstate entries with the options: two candidates of 4
SECOND = 4  # the second candidate's first entry in mstate
REC_BUCKETS = 5  # recovery: the map's key by misses in the last 16 bytes, 0..4 or more
MISS_MASK = 0xFFFF


def map_entries(recover, two):
    """Entries of one candidate's map: 64 x REC_BUCKETS with recovery x 3 with two."""
    return 64 * (REC_BUCKETS if recover else 1) * (3 if two else 1)


@kernel_inline
def length_bucket(n):
    if n < 16:
        return n
    return min(16 + ((n - 16) >> 3), 31)


@kernel_inline
def misses(m):
    """How many of the last 16 bytes missed (the bits of m)."""
    n = 0
    while m:
        n += m & 1
        m >>= 1
    return n


@kernel_inline
def on_path_at(mstate, o, node, depth):
    """-1 if node is off the expected byte's prefix path of the candidate whose state starts
    at mstate[o] (or it has no match), else the expected bit."""
    if mstate[o + 1] == 0:
        return -1
    e = mstate[o + 2] | 256
    if (e >> (8 - depth)) != node:
        return -1
    return (e >> (7 - depth)) & 1


@kernel_inline
def map_key(mstate, o, recover, two):
    """The candidate's map entry for expected bit 0 (add the bit): by (the other candidate's
    agreement, its misses bucket, its length bucket)."""
    lb = length_bucket(mstate[o + 1])
    r, nr, a = 0, 1, 0
    if recover:
        r = min(misses(mstate[o + 3]), REC_BUCKETS - 1)
        nr = REC_BUCKETS
    if two:
        q = SECOND - o  # the other candidate
        if mstate[q + 1] > 0:
            a = 1 if mstate[q + 2] == mstate[o + 2] else 2
    return ((a * nr + r) * 32 + lb) * 2


@kernel_inline
def cand_inputs(x, col, mstate, o, mmap, base, node, depth, recover, two):
    """Write the inputs of the candidate at mstate[o] (its map at mmap[base:]) at node into
    x[node, col:col + 2]; return on_path_at."""
    e = on_path_at(mstate, o, node, depth)
    if e < 0:
        x[node, col] = 0
        x[node, col + 1] = 0
    else:
        lb = length_bucket(mstate[o + 1])
        x[node, col] = stretch(map_p(mmap, base + map_key(mstate, o, recover, two) + e))
        x[node, col + 1] = (lb << 6) if e else -(lb << 6)
    return e


@kernel
def update_cand_map(mmap, base, mstate, o, byte, map_limit, recover, two):
    """Learn the coded byte on the nodes of the expected byte's path that it took, in the map
    of the candidate at mstate[o] (at mmap[base:])."""
    if mstate[o + 1] == 0:
        return
    k = base + map_key(mstate, o, recover, two)
    node = 1
    for d in range(8):
        e = on_path_at(mstate, o, node, d)
        if e < 0:
            return
        bit = (byte >> (7 - d)) & 1
        map_update(mmap, k + e, bit, map_limit)
        node = 2 * node + bit


@kernel
def match_context(ctxh, kinds, mstate, mode):
    """The hash of the "matched" context models (history.K_MATCHED): the byte the match
    model expects and its length bucket (capped at 15), or no match; mode bit 0
    (mix.match_ctx2): also the second candidate's expected byte (or none); bit 1 (recovery
    on): also whether the match is recovering from a miss."""
    for i in range(kinds.shape[0]):
        if kinds[i] == K_MATCHED:
            n = mstate[1]
            v = mstate[2] | (min(length_bucket(n), 15) << 8) | 0x10000 if n else 0
            if n and mode & 2 and mstate[3] != 0:
                v |= 0x20000
            if mode & 1:
                v |= ((mstate[SECOND + 2] | 256) << 20) if mstate[SECOND + 1] else 0
            h = fmix(u64(v)) if v else M1
            ctxh[i] = tagged(h, K_MATCHED)


@kernel
def cand_advance(mt, mstate, o, hist, hstate, hmask, minlen, need, recover):
    """After a byte was pushed to the history: extend or drop the candidate at mstate[o],
    find one by its table mt (hashing minlen bytes; it must verify at least need bytes) if
    none, record the current position, set the expected byte. recover > 0: keep it after a
    miss until recover of its last 16 bytes missed (module docstring)."""
    t = hstate[0]
    last = hist[(t - 1) & hmask]
    if mstate[o + 1] > 0:
        if mstate[o + 2] == last:
            mstate[o + 1] = min(mstate[o + 1] + 1, MAX_LEN)
            mstate[o] += 1
            if recover:
                mstate[o + 3] = (mstate[o + 3] << 1) & MISS_MASK
        elif recover:
            m = ((mstate[o + 3] << 1) | 1) & MISS_MASK
            if misses(m) >= recover:
                mstate[o + 1] = 0
                mstate[o + 3] = 0
            else:
                mstate[o + 1] = 1
                mstate[o + 3] = m
                mstate[o] += 1
        else:
            mstate[o + 1] = 0
    if t < minlen:
        return
    h = u64(0)
    for k in range(1, minlen + 1):
        h = (h + u64(hist[(t - k) & hmask]) + u64(1)) * M1
    slot = np.int64(fmix(h) & u64(mt.shape[0] - 1))
    recovering = recover > 0 and mstate[o + 1] > 0 and mstate[o + 3] != 0
    if mstate[o + 1] == 0 or recovering:
        cand = np.int64(mt[slot])
        # The candidate's context must still be in the ring buffer.
        if cand > 0 and t - cand + MAX_VERIFY < hmask and not (recovering and cand == mstate[o]):
            n = 0
            while n < MAX_VERIFY and n < cand:
                if hist[(cand - 1 - n) & hmask] != hist[(t - 1 - n) & hmask]:
                    break
                n += 1
            if n >= need and n > (mstate[o + 1] if recovering else 0):
                mstate[o] = cand
                mstate[o + 1] = n
                if recover:
                    mstate[o + 3] = 0
    mt[slot] = np.int32(t)
    if mstate[o + 1] > 0:
        mstate[o + 2] = hist[mstate[o] & hmask]
