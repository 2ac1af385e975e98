"""Match model: the last earlier occurrence of the recent bytes predicts the byte after it.

Arrays (T = 2^match_log table entries, H history bytes):
    mt (T,) int32          hash of the last match_min bytes -> the byte count t right after
                           their last occurrence (0: none)
    mstate (3,) int64      [0] t of the predicted byte in the history, [1] match length in
                           bytes (0: no match), [2] the predicted (expected) byte
    mmap (64,) int32       adaptive map (counters.map_*) keyed by length bucket (32) x the
                           expected bit (2): how often the expected bit is right

A match is found by hash, then verified by comparing the history backwards (so its length is
real, and a hash collision gives none); it extends while the bytes keep agreeing. Its two
inputs at a node on the expected byte's prefix path are stretch(mmap[bucket, bit]) and the
expected bit's sign times the bucket; elsewhere both are 0 (the match says nothing there).
"""

import numpy as np

from ..jit import kernel, kernel_inline
from .counters import map_p, map_update, stretch
from .history import K_MATCHED, M1, S56, fmix

u64 = np.uint64
MAX_LEN = 65535
MAX_VERIFY = 1024  # longest backward comparison when a match starts


@kernel_inline
def length_bucket(n):
    if n < 16:
        return n
    return min(16 + ((n - 16) >> 3), 31)


@kernel
def on_path(mstate, node, depth):
    """-1 if node is off the expected byte's prefix path (or no match), else the expected bit."""
    if mstate[1] == 0:
        return -1
    e = mstate[2] | 256
    if (e >> (8 - depth)) != node:
        return -1
    return (e >> (7 - depth)) & 1


@kernel
def match_inputs(x, col, mstate, mmap, node, depth):
    """Write the match inputs of node into x[node, col:col + 2]; return on_path."""
    e = on_path(mstate, node, depth)
    if e < 0:
        x[node, col] = 0
        x[node, col + 1] = 0
    else:
        lb = length_bucket(mstate[1])
        x[node, col] = stretch(map_p(mmap, 2 * lb + e))
        x[node, col + 1] = (lb << 6) if e else -(lb << 6)
    return e


@kernel
def update_match_map(mmap, mstate, byte, map_limit):
    """Learn the coded byte on the nodes of the expected byte's path that it took."""
    if mstate[1] == 0:
        return
    lb = length_bucket(mstate[1])
    node = 1
    for d in range(8):
        e = on_path(mstate, node, d)
        if e < 0:
            return
        bit = (byte >> (7 - d)) & 1
        map_update(mmap, 2 * lb + e, bit, map_limit)
        node = 2 * node + bit


@kernel
def match_context(ctxh, kinds, mstate):
    """The hash of the "matched" context models (history.K_MATCHED): the byte the match
    model expects and its length bucket (capped at 15), or no match."""
    for i in range(kinds.shape[0]):
        if kinds[i] == K_MATCHED:
            n = mstate[1]
            h = fmix(u64(mstate[2] | (min(length_bucket(n), 15) << 8) | 0x10000)) if n else M1
            ctxh[i] = (h & u64(0x00FFFFFFFFFFFFFF)) ^ (u64(K_MATCHED + 1) << S56)


@kernel
def match_advance(mt, mstate, hist, hstate, hmask, minlen):
    """After a byte was pushed to the history: extend or drop the match, find one if none,
    record the current position, set the expected byte."""
    t = hstate[0]
    last = hist[(t - 1) & hmask]
    if mstate[1] > 0:
        if mstate[2] == last:
            mstate[1] = min(mstate[1] + 1, MAX_LEN)
            mstate[0] += 1
        else:
            mstate[1] = 0
    if t < minlen:
        return
    h = u64(0)
    for k in range(1, minlen + 1):
        h = (h + u64(hist[(t - k) & hmask]) + u64(1)) * M1
    slot = np.int64(fmix(h) & u64(mt.shape[0] - 1))
    if mstate[1] == 0:
        cand = np.int64(mt[slot])
        # The candidate's context must still be in the ring buffer.
        if cand > 0 and t - cand + MAX_VERIFY < hmask:
            n = 0
            while n < MAX_VERIFY and n < cand:
                if hist[(cand - 1 - n) & hmask] != hist[(t - 1 - n) & hmask]:
                    break
                n += 1
            if n > 0:
                mstate[0] = cand
                mstate[1] = n
    mt[slot] = np.int32(t)
    if mstate[1] > 0:
        mstate[2] = hist[mstate[0] & hmask]
