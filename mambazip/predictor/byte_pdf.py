"""The Mamba adapter: the Mamba's byte pdf as the probability of each binary decision.

Arrays:
    pdf (256,) float32     the Mamba's pdf over the next byte
    tree (512,) float64    work: tree[256 + b] = pdf[b]; tree[n] = tree[2n] + tree[2n+1] for
                           n = 255 down to 1 (one fixed order, so every platform sums the same)
    pm (256,) int32        pm[n] = 12-bit p(bit = 1 at node n) = round(4096 tree[2n+1] / tree[n])
                           clamped to [1, 4095]; 2048 where the subtree has no mass

Node n (1..255) is the partial byte c0 = 1 followed by the bits so far (paq style): its bit-0
child is 2n, its bit-1 child 2n + 1, and byte b is leaf 256 + b.

The Mamba enters the combiner as stretch(pm), as stretch of an APM over pm keyed by the order-1
context and the node (the Mamba's calibration where it is, not on average), and its expected
byte (the argmax of pdf, first on ties) selects a combiner weight set (see loop.py) and,
with the "mamba" context model, keys a context of its own (mamba_context).
"""

import numpy as np

from ..jit import kernel, kernel_inline
from .history import K_MAMBA, fmix, tagged


@kernel
def node_sums(tree, pdf):
    """tree (512,) from pdf (256,): the leaves, then every node's sum; return the expected byte."""
    best = 0
    for b in range(256):
        v = np.float64(pdf[b])
        # A negative, nan or infinite entry counts as no mass: every later step stays finite.
        tree[256 + b] = v if 0.0 < v < np.inf else 0.0
        if tree[256 + b] > tree[256 + best]:
            best = b
    for n in range(255, 0, -1):
        tree[n] = tree[2 * n] + tree[2 * n + 1]
    return best


@kernel_inline
def node_prob(tree, n):
    """pm of node n from the sums of node_sums."""
    if tree[n] > 0.0:
        q = np.int64(np.floor(4096.0 * tree[2 * n + 1] / tree[n] + 0.5))
        return min(max(q, 1), 4095)
    return 2048


@kernel
def node_probs(pm, tree, pdf):
    """Fill pm (256,) from pdf (256,); return the expected byte. (The nibble coding of
    format 5 calls node_sums once and node_prob only on the 30 nodes it evaluates.)"""
    best = node_sums(tree, pdf)
    pm[0] = 2048
    for n in range(1, 256):
        pm[n] = node_prob(tree, n)
    return best


# Bounds of the Mamba's confidence buckets: the probability of its expected byte.
CONFIDENCE = (0.15, 0.3, 0.5, 0.7, 0.9)


@kernel
def mamba_context(ctxh, kinds, tree, expected, c1):
    """The hash of the "mamba" context models (history.K_MAMBA): the Mamba's expected byte, how
    sure it is (a CONFIDENCE bucket) and the last byte c1; tree from node_sums. Its slots
    learn what actually follows where the Mamba expects a byte, as the match model's
    expected byte keys the "matched" context."""
    sure = 0
    if tree[1] > 0.0:
        q = tree[256 + expected] / tree[1]
        for bound in CONFIDENCE:
            sure += q > bound
    h = tagged(fmix(expected | (sure << 8) | (c1 << 12) | 0x100000), K_MAMBA)
    for i in range(kinds.shape[0]):
        if kinds[i] == K_MAMBA:
            ctxh[i] = h
