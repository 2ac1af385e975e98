"""The shared byte history and the context hashes computed from it once per byte.

Arrays (H = 2^hist_log history bytes, C = number of context models):
    hist (H,) uint8        ring buffer: byte number t lives at hist[t & (H - 1)]
    hstate (3,) int64      [0] bytes seen so far (t of the next byte), [1] t of the current
                           line's first byte, [2] t of the previous line's first byte
    words (4,) uint64      hash of the current alphabetic word (case-folded), of the previous
                           one, of the one before it; [3] the nesting state (nest_next)
    kinds (C,) int64       which context each model uses (K_* below)
    ind (IND_SIZE,) uint16 with an indirect kind: per byte value (ind[c]) and per pair
                           (ind[256 + (c2 << 8 | c1)]), the two bytes that followed it last;
                           empty without one
    ctxh (C,) uint64       that context's hash for the next byte

Hashes are ours (DESIGN.md): multiply by odd 64-bit constants and xor-shift, all in uint64 with
wrap-around, so they are the same on every platform and never use Python's hash().
"""

import numpy as np

from ..jit import kernel, kernel_inline

u64 = np.uint64

# Context kinds: orders 0..6 are 0..6. The codes are part of the format (each hash carries
# its kind's code): new kinds take new codes.
K_WORD, K_WORD2, K_SKIP1, K_SKIP3 = 7, 8, 9, 10
K_O7, K_O8, K_WORD3, K_WORDGAP, K_COLUMN, K_ABOVE, K_CLASSES, K_WORDCLASS, K_MATCHED = range(11, 20)
K_INDIRECT1, K_INDIRECT2, K_NEST, K_MAMBA = 20, 21, 22, 23
K_WORD1B = 24
K_RECORD, K_RECORD2, K_RECPOS = 25, 26, 27
IND_SIZE = 256 + 65536
N_ORDERS = 9  # orders 0..8 hashed once per byte
KIND_CODES = {
    **{f"o{k}": k for k in range(7)},
    "o7": K_O7,
    "o8": K_O8,
    "word": K_WORD,
    "word2": K_WORD2,
    "skip1": K_SKIP1,
    "skip3": K_SKIP3,
    "word3": K_WORD3,
    "wordgap": K_WORDGAP,
    "column": K_COLUMN,
    "above": K_ABOVE,
    "classes": K_CLASSES,
    "wordclass": K_WORDCLASS,
    "matched": K_MATCHED,  # hashed by match.match_context
    "indirect1": K_INDIRECT1,
    "indirect2": K_INDIRECT2,
    "nest": K_NEST,
    "mamba": K_MAMBA,  # hashed by byte_pdf.mamba_context
    "word1b": K_WORD1B,
    "record": K_RECORD,  # hashed by record.record_context
    "record2": K_RECORD2,
    "recpos": K_RECPOS,
}
MAX_COLUMN = 255  # columns past this share a context
# The nesting state's fields: open (, [ and { counted in 4 bits each (a close below zero and an
# open past 15 are ignored), then inside a tag (after < until >), inside a double quote (until
# the closing one or the end of the line).
NEST_PAREN, NEST_BRACKET, NEST_BRACE, NEST_TAG, NEST_QUOTE = 0, 4, 8, 12, 13

M1 = u64(0x9E3779B97F4A7C15)
M2 = u64(0xBF58476D1CE4E5B9)
M3 = u64(0x94D049BB133111EB)
S27, S30, S31, S56 = u64(27), u64(30), u64(31), u64(56)


@kernel_inline
def fmix(x):
    """A bijective 64-bit finaliser: every input bit reaches every output bit."""
    x = u64(x)
    x ^= x >> S30
    x *= M2
    x ^= x >> S27
    x *= M3
    x ^= x >> S31
    return x


@kernel_inline
def tagged(h, kind):
    """Context hash h of a model of kind ``kind``, its top byte the kind's tag: models of
    different kinds never share a slot, even where their hashes would collide."""
    return (h & u64(0x00FFFFFFFFFFFFFF)) ^ (u64(kind + 1) << S56)


@kernel
def back(hist, hstate, mask, k):
    """The byte k back (k >= 1) as uint64, 0 before the start."""
    t = hstate[0] - k
    if t < 0:
        return u64(0)
    return u64(hist[t & mask])


@kernel_inline
def is_letter(c):
    return (65 <= c <= 90) or (97 <= c <= 122)


@kernel_inline
def char_class(c):
    """0 lower-case letter, 1 upper-case, 2 digit, 3 space or tab, 4 newline, 5 other ASCII
    punctuation, 6 control, 7 a byte above 127."""
    c = np.int64(c)
    if 97 <= c <= 122:
        return 0
    if 65 <= c <= 90:
        return 1
    if 48 <= c <= 57:
        return 2
    if c == 32 or c == 9:
        return 3
    if c == 10:
        return 4
    if c >= 128:
        return 7
    return 6 if c < 32 or c == 127 else 5


@kernel_inline
def _nest_count(state, shift, step):
    """state with the 4-bit count at shift moved by step, where it stays in 0..15."""
    n = np.int64((state >> u64(shift)) & u64(15)) + step
    if n < 0 or n > 15:
        return state
    return (state & ~(u64(15) << u64(shift))) | (u64(n) << u64(shift))


@kernel
def nest_next(state, byte):
    """The nesting state (NEST_*) after byte: what markup and source code are inside of, which
    decides much of what comes next (a closing bracket, a tag's attributes, a string's end)."""
    if byte == 40 or byte == 41:  # ( )
        return _nest_count(state, NEST_PAREN, 81 - 2 * byte)
    if byte == 91 or byte == 93:  # [ ]
        return _nest_count(state, NEST_BRACKET, 92 - byte)
    if byte == 123 or byte == 125:  # { }
        return _nest_count(state, NEST_BRACE, 124 - byte)
    if byte == 60:  # <
        return state | (u64(1) << u64(NEST_TAG))
    if byte == 62:  # >
        return state & ~(u64(1) << u64(NEST_TAG))
    if byte == 34:  # "
        return state ^ (u64(1) << u64(NEST_QUOTE))
    if byte == 10:
        return state & ~(u64(1) << u64(NEST_QUOTE))
    return state


@kernel
def history_push(hist, hstate, words, mask, byte):
    """Append byte; extend the current word or, at a non-letter ending a word, start a new one;
    after a newline, start a line; move the nesting state on."""
    hist[hstate[0] & mask] = byte
    words[3] = nest_next(words[3], byte)
    hstate[0] += 1
    if byte == 10:
        hstate[2] = hstate[1]
        hstate[1] = hstate[0]
    if is_letter(byte):
        c = u64(byte | 32)  # case-fold
        words[0] = (words[0] + c + u64(1)) * M1
    elif words[0] != u64(0):
        words[2] = words[1]
        words[1] = words[0]
        words[0] = u64(0)


@kernel
def _above(hist, hstate, mask):
    """(column of the next byte, capped at MAX_COLUMN; the byte at that column of the previous
    line, 0 where that line is shorter or its bytes have left the ring)."""
    t, line, prev = hstate[0], hstate[1], hstate[2]
    col = t - line
    above = u64(0)
    if line > 0 and col < line - prev and t - (prev + col) <= mask:
        above = u64(hist[(prev + col) & mask])
    return u64(min(col, MAX_COLUMN)), above


@kernel
def indirect_push(ind, hist, hstate, mask):
    """The last byte followed the byte before it, and the pair before it: shift it into their
    entries of ind."""
    t = hstate[0]
    b1 = np.int64(back(hist, hstate, mask, 1))
    b2 = np.int64(back(hist, hstate, mask, 2))
    if t >= 2:
        ind[b2] = np.uint16(((np.int64(ind[b2]) << 8) | b1) & 0xFFFF)
    if t >= 3:
        e = 256 + ((np.int64(back(hist, hstate, mask, 3)) << 8) | b2)
        ind[e] = np.uint16(((np.int64(ind[e]) << 8) | b1) & 0xFFFF)


@kernel
def context_hashes(ctxh, orders, hist, hstate, words, kinds, mask, ind):
    """ctxh[i] = hash of context kind kinds[i] for the next byte; the kind sits in the top byte
    so that equal byte strings of different kinds do not share a hash. orders (N_ORDERS,)
    uint64 is work space: orders[k] the hash of the last k bytes. ind: the indirect table
    (empty without an indirect kind), moved on by the last byte here."""
    if ind.shape[0] > 0:
        indirect_push(ind, hist, hstate, mask)
    orders[0] = u64(0)
    acc = u64(0)
    for k in range(1, N_ORDERS):
        acc = (acc + back(hist, hstate, mask, k) + u64(1)) * M1
        acc ^= acc >> S30
        orders[k] = acc
    b1 = back(hist, hstate, mask, 1)
    b2 = back(hist, hstate, mask, 2)
    b3 = back(hist, hstate, mask, 3)
    b4 = back(hist, hstate, mask, 4)
    for i in range(kinds.shape[0]):
        kind = kinds[i]
        if kind <= 6:
            h = orders[kind]
        elif kind in (K_O7, K_O8):
            h = orders[kind - K_O7 + 7]
        elif kind == K_WORD:
            h = fmix(words[0]) + b1 * M3  # the word so far and the byte after it
        elif kind == K_WORD2:
            h = fmix(words[0] ^ (words[1] * M2))
        elif kind == K_SKIP1:
            h = fmix((b2 << u64(8)) | b3)
        elif kind == K_SKIP3:
            h = fmix(b4 + u64(0x100))
        elif kind == K_WORD3:
            h = fmix(words[0] ^ (words[1] * M2) ^ (words[2] * M3))
        elif kind == K_WORDGAP:  # the word before the last, skipping the last
            h = fmix(words[0] ^ (words[2] * M3))
        elif kind in (K_COLUMN, K_ABOVE):
            col, above = _above(hist, hstate, mask)
            h = fmix((above << u64(8)) | (b1 if kind == K_ABOVE else col << u64(16)))
        elif kind == K_CLASSES:  # the classes of the last 8 bytes, and the last byte
            acc = b1
            for k in range(1, 9):
                acc = (acc << u64(3)) | u64(char_class(back(hist, hstate, mask, k)))
            h = fmix(acc)
        elif kind == K_WORDCLASS:  # the word so far and the classes of the 2 bytes before it
            h = fmix(words[0] ^ (u64(char_class(b1) * 8 + char_class(b2)) * M2))
        elif kind == K_NEST:  # the nesting state and the last byte
            h = fmix((words[3] << u64(8)) | b1 | u64(0x1000000000))
        elif kind == K_INDIRECT1:  # the last byte, and the two that followed it before
            h = fmix((u64(ind[b1]) << u64(8)) | b1 | u64(0x1000000))
        elif kind == K_INDIRECT2:  # the last two bytes, and the two that followed them before
            h = fmix((u64(ind[256 + ((b2 << u64(8)) | b1)]) << u64(16)) | (b2 << u64(8)) | b1)
        elif kind == K_WORD1B:  # the last whole word and the last two bytes
            h = fmix((words[1] * M3) ^ (b1 | (b2 << u64(8)) | u64(1 << 20)))
        else:  # K_MATCHED, K_MAMBA and K_RECORD*, set by their parts
            h = u64(0)
        ctxh[i] = tagged(h, kind)
