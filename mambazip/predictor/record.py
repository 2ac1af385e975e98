"""The record length of fixed-width data, found from the bytes, and the contexts it gives.

Tables, spreadsheets, arrays of numbers and bitmaps repeat with a period: the byte one record
back (``above``) predicts the next byte as the byte one line back does in text, but a record
has no newline to end it. The period is found as a byte value that recurs at the same gap
twice running votes for that gap; a majority vote (one candidate, a count that a match raises
and a mismatch lowers, the candidate replaced at zero) keeps the gap most bytes agree on, and
it becomes the record length once its count reaches RECORD_ON.

With a record length r, the next byte's contexts (history.K_RECORD*): ``record`` the byte
above (r back), the top 2 bits of the one after it (r - 1 back) and the low 2 bits of the
last byte, as a bitmap's pixel is predicted from those above it and nearest to it (whole
bytes there made the context too rare to learn: ptt5 0.5556 against 0.5381 bits/byte);
``record2`` the bytes one and two records back, the field's column alone; ``recpos`` the
position in the record and the byte above. Each carries r, so data that changes its record
length starts new slots.

Until a length is found, record2 and recpos are one context each and record is four: the
slots they take are few, and the sweep (benchmarks/sweep-2026-12-08-record.md) counts their
cost against the gain once a length is found. A length, once found, is kept until another
replaces it.

State (REC_SIZE,) int64, only where a record context or the record_pos set is used:
    [0:256]   t + 1 of each byte value's last occurrence (0: not seen)
    [256:512] the gap between each byte value's last two occurrences
    [512]     the candidate gap, [513] its count, [514] the record length (0: none yet)
"""

import numpy as np

from ..jit import kernel
from .history import K_RECORD, K_RECORD2, K_RECPOS, back, fmix, tagged

u64 = np.uint64

# The contexts and weight set that read this state (loop.layout allocates it for them).
RECORD_KINDS = frozenset(("record", "record2", "recpos"))
RECORD_SETS = frozenset(("record_pos",))
REC_SIZE = 515
CANDIDATE, VOTES, LENGTH = 512, 513, 514
MIN_RECORD = 2  # a gap of 1 is a run, which the order-1 context already knows
# Longer records than this (and than half the history ring, where record2's byte two
# records back would be overwritten) are left to the order-n contexts.
MAX_RECORD = 1 << 16
# A new period must win back these votes, and then RECORD_ON more, before it replaces the
# length: a table's few odd rows do not move it, a file of another kind soon does.
MAX_VOTES = 64
RECORD_ON = 16


@kernel
def record_push(rec, hist, hstate, mask):
    """The last byte (at t = hstate[0] - 1, after history_push) was seen: its gap from the
    last time votes if it repeats the gap before (module docstring)."""
    t = hstate[0] - 1
    c = np.int64(hist[t & mask])
    if rec[c] > 0:
        gap = t - (rec[c] - 1)
        longest = min(MAX_RECORD, (mask + 1) >> 1)
        if gap == rec[256 + c] and MIN_RECORD <= gap <= longest:
            if gap == rec[CANDIDATE]:
                rec[VOTES] = min(rec[VOTES] + 1, MAX_VOTES)
            elif rec[VOTES] > 0:
                rec[VOTES] -= 1
            else:
                rec[CANDIDATE] = gap
                rec[VOTES] = 1
            if rec[VOTES] >= RECORD_ON:
                rec[LENGTH] = rec[CANDIDATE]
        rec[256 + c] = gap
    rec[c] = t + 1


@kernel
def record_context(ctxh, kinds, rec, hist, hstate, mask):
    """The hashes of the record context models for the next byte (module docstring); before
    a record length is found, above is 0 and the position 0."""
    r = rec[LENGTH]
    b1 = back(hist, hstate, mask, 1)
    above, after, above2, pos = u64(0), u64(0), u64(0), u64(0)
    if r > 0:
        above = back(hist, hstate, mask, r)
        after = back(hist, hstate, mask, r - 1)
        above2 = back(hist, hstate, mask, 2 * r)
        pos = u64(hstate[0] % r)
    length = u64(r) << u64(32)
    for i in range(kinds.shape[0]):
        kind = kinds[i]
        if kind == K_RECORD:
            near = ((b1 & u64(3)) << u64(2)) | (after >> u64(6))
            ctxh[i] = tagged(fmix(length | (near << u64(8)) | above), kind)
        elif kind == K_RECORD2:
            ctxh[i] = tagged(fmix(length | (above2 << u64(8)) | above), kind)
        elif kind == K_RECPOS:
            ctxh[i] = tagged(fmix(length | (pos << u64(8)) | above), kind)
