"""Each part of the context-mixing predictor alone, on input whose answer is known."""

import math

import numpy as np
import pytest

from mambazip.predictor import SMALL
from mambazip.predictor.apm import apm_init, apm_predict, apm_update
from mambazip.predictor.byte_pdf import node_probs
from mambazip.predictor.combiner import combine, train
from mambazip.predictor.context import predict_first, predict_second, update_contexts
from mambazip.predictor.counters import (
    COUNTER_RATES,
    MAP_SIZE,
    SQUASH,
    STRETCH,
    counter_next,
    map_init,
)
from mambazip.predictor.history import context_hashes, history_push
from mambazip.predictor.loop import layout
from mambazip.predictor.match import MAX_LEN, cand_advance, update_cand_map


def squash(x):
    return int(SQUASH[min(max(x, -2047), 2047) + 2047])


def test_squash_and_stretch_are_monotone_and_inverse_within_one_step():
    assert np.all(np.diff(SQUASH) >= 0) and np.all(np.diff(STRETCH) >= 0)
    assert squash(0) == 2048 and SQUASH[0] == 1 and SQUASH[-1] == 4095
    for p in range(1, 4096):
        x = int(STRETCH[p])
        # stretch(p) is the first x whose squash reaches p: one step less falls short.
        assert squash(x) >= p or x == 2047
        assert x == -2047 or squash(x - 1) < p


def test_counter_moves_by_a_third_of_the_distance_on_its_first_bit():
    # Never seen: p = 2048, rate 1 / 1.5 = 43690 / 65536: 2048 + (2047 * 43690 >> 16) = 3412.
    assert counter_next(0, 1, 14, COUNTER_RATES[0]) == (3412 << 4) | 1
    # p = 3412, n = 1, rate 1 / 2.5 = 26214 / 65536: 3412 - (3412 * 26214 >> 16) (floored).
    assert counter_next((3412 << 4) | 1, 0, 14, COUNTER_RATES[0]) == (
        ((3412 + (-3412 * 26214 >> 16)) << 4) | 2
    )


def test_slow_rates_move_an_old_counter_by_1_48_instead_of_1_15_5_of_the_distance():
    # n = 14, p = 2048, bit 1. Schedule 0: 1 / 15.5 = 4228 / 65536, 2047 * 4228 >> 16 = 132.
    # Schedule 1 (counter_rates 1): 1 / 48 = 1365 / 65536, 2047 * 1365 >> 16 = 42.
    assert counter_next((2048 << 4) | 14, 1, 14, COUNTER_RATES[0]) == ((2048 + 132) << 4) | 14
    assert counter_next((2048 << 4) | 14, 1, 14, COUNTER_RATES[1]) == ((2048 + 42) << 4) | 14
    # The first seven bits move it at the same rates in both schedules.
    assert (COUNTER_RATES[1][:7] == COUNTER_RATES[0][:7]).all()


def test_combiner_update_matches_hand_derived_weights():
    w = np.full((1, 2), 16384, np.int32)  # 0.25 each
    x = np.zeros((2, 2), np.int32)
    x[1] = 512, -256
    # (16384 * 512 - 16384 * 256) >> 16 = 64; squash(64) = round(4096 / (1 + e^-0.25)) = 2303.
    s = combine(w, 0, x, 1, 2)
    assert s == 64 and squash(s) == 2303
    # bit 1, lr 2: err = (4096 - 2303) * 2 = 3586; w += (x * err + 2^13) >> 14, floored:
    # (1835912 + 8192) >> 14 = 112 and (-918016 + 8192) >> 14 = -56.
    train(w, 0, x, 1, 2, s, 1, 2, 0, 0, 0, 0)
    assert w[0].tolist() == [16384 + 112, 16384 - 56]


def test_combiner_errors_within_the_dead_zone_train_nothing():
    w = np.full((1, 2), 16384, np.int32)
    x = np.zeros((2, 2), np.int32)
    x[1] = 512, -256
    # s = 64, squash 2303: bit 1 is an error of 1793, bit 0 of -2303.
    train(w, 0, x, 1, 2, 64, 1, 2, 0, 0, 0, 1793)
    train(w, 0, x, 1, 2, 64, 0, 2, 0, 0, 0, 2303)
    assert w[0].tolist() == [16384, 16384]
    train(w, 0, x, 1, 2, 64, 1, 2, 0, 0, 0, 1792)
    assert w[0].tolist() == [16384 + 112, 16384 - 56]  # as test_combiner_update_... derives


RANGES = [(3, 7, 10), (0, 0, 10), (6, 2, 10), (8, 14, 10), (12, 14, 9)]


@pytest.mark.parametrize("lo, hi, n", RANGES)
def test_combiner_steps_inputs_lo_to_hi_at_the_second_rate(lo, hi, n):
    """Reference: the rule of the module docstring in Python integers, one input at a time,
    with lr2 where lo <= k < hi, lr elsewhere, the row's scale and the clamp to +-2^22."""
    rng = np.random.default_rng(lo * 100 + hi)
    w = rng.integers(-(1 << 22), 1 << 22, (2, n), dtype=np.int64).astype(np.int32)
    x = rng.integers(-2047, 2048, (3, n), dtype=np.int64).astype(np.int32)
    w[1, 0] = (1 << 22) - 1  # a step past the bound is clamped
    x[2, 0] = 2047
    s, lr, lr2, scale = -300, 5, 11, 3 * 65536 // 2
    e = 4096 - int(SQUASH[s + 2047])
    want = w[1].astype(object)
    for k in range(n):
        err = (e * (lr2 if lo <= k < hi else lr) * scale) >> 16
        v = int(w[1, k]) + ((int(x[2, k]) * err + (1 << 13)) >> 14)
        want[k] = min(max(v, -(1 << 22)), 1 << 22)
    train(w, 1, x, 2, n, s, 1, lr, lo, hi, lr2, 0, scale)
    assert w[1].tolist() == list(want)


def test_apm_interpolates_between_buckets_and_hits_them_at_the_edges():
    t = np.zeros(2 * 33, np.uint16)
    apm_init(t)
    assert apm_predict(t, 1, 0) == (2048, 33 + 16)  # initialised to squash of the centres
    t[:33] = np.arange(33) * 1000
    assert apm_predict(t, 0, 5 * 128 - 2048) == (5000 >> 4, 5)  # edge: bucket 5 itself
    # Midway: (5000 * 64 + 6000 * 64) >> 11 = 343; the tie updates the upper bucket.
    assert apm_predict(t, 0, 5 * 128 - 2048 + 64) == (343, 6)
    assert apm_predict(t, 0, 5 * 128 - 2048 + 63)[1] == 5
    apm_update(t, 6, 1, 7)
    assert t[6] == 6000 + ((65535 - 6000) >> 7)


def test_mamba_adapter_matches_float64_subtree_sums():
    rng = np.random.default_rng(7)
    pdf = (rng.random(256) ** 8).astype(np.float32)
    pdf[96:128] = 0.0  # an empty subtree (node 11 covers bytes 96..127) gives 2048
    pm = np.zeros(256, np.int32)
    expected = node_probs(pm, np.zeros(512), pdf)
    assert expected == int(np.argmax(pdf))
    # Subtree sums level by level, pairs of neighbours: the documented bottom-up order.
    levels = [pdf.astype(np.float64)]
    while levels[-1].size > 1:
        levels.append(levels[-1][0::2] + levels[-1][1::2])
    for node in range(1, 256):
        depth = node.bit_length() - 1
        children = levels[7 - depth][2 * (node - (1 << depth)) :][:2]
        total = levels[8 - depth][node - (1 << depth)]
        want = (
            2048 if total == 0 else min(max(math.floor(4096 * children[1] / total + 0.5), 1), 4095)
        )
        assert pm[node] == want, node
    assert pm[11] == 2048 and pm[5] == 1  # node 5 = bytes 64..127: its right half is empty


class _History:
    """The history and context views of one model kind, as loop.py lays them out."""

    def __init__(self, kinds, log=12):
        self.mask = (1 << log) - 1
        self.hist = np.zeros(1 << log, np.uint8)
        sizes = layout(SMALL)
        self.hstate = np.zeros(sizes["hstate"], np.int64)
        self.words = np.zeros(sizes["words"], np.uint64)
        self.orders = np.zeros(sizes["orders"], np.uint64)
        self.kinds = np.array(kinds, np.int64)
        self.ctxh = np.zeros(len(kinds), np.uint64)
        self.contexts()

    def push(self, byte):
        history_push(self.hist, self.hstate, self.words, self.mask, byte)
        self.contexts()

    def contexts(self):
        context_hashes(
            self.ctxh, self.orders, self.hist, self.hstate, self.words, self.kinds, self.mask,
            np.zeros(0, np.uint16),
        )  # fmt: skip


def test_order2_model_becomes_confident_on_a_period_3_sequence():
    h = _History([2])
    tbl = np.zeros((1 << 10, 16), np.uint16)
    maps = np.zeros(MAP_SIZE, np.int32)
    map_init(maps)
    x = np.zeros((256, 1), np.int32)
    midx = np.zeros((256, 1), np.int32)
    bmask = (1 << 10) // 4 - 1
    # No bit histories: hst, hmaps and runs empty, column 0; no more inputs (columns 0), no
    # states, no byte histories, nothing halved.
    hs = (np.zeros((0, 16), np.uint8), np.zeros(0, np.int32), np.zeros((256, 1), np.int32), 0,
          False, np.zeros(0, np.uint8), 0, 0, 0, 0, np.zeros(0, np.int32),
          np.zeros((0, 1), np.int32), 0, np.zeros((0, 2), np.uint8), 0, np.zeros(0, np.int32),
          np.zeros((0, 1), np.int32), 0)  # fmt: skip
    probs = []
    for byte in b"abc" * 200:
        predict_first(x, midx, tbl, maps, h.ctxh, bmask, hs)
        for nib in range(16):
            predict_second(x, midx, tbl, maps, h.ctxh, bmask, nib, True, hs)
        p, node = 1.0, 1
        for d in range(8):
            bit = (byte >> (7 - d)) & 1
            p1 = squash(int(x[node, 0])) / 4096
            p *= p1 if bit else 1 - p1
            node = 2 * node + bit
        probs.append(p)
        update_contexts(tbl, maps, midx, h.ctxh, bmask, byte, 14, 0, 255, hs)
        h.push(byte)
    assert probs[0] < 0.01  # nothing known yet
    assert min(probs[-30:]) > 0.95


def test_match_model_predicts_a_repeated_block_with_p_above_099():
    rng = np.random.default_rng(3)
    block = rng.integers(0, 256, 3000).astype(np.uint8)
    data = np.concatenate([block, block])
    h = _History([0], log=14)
    mt = np.zeros(1 << 12, np.int32)
    mstate = np.zeros(3, np.int64)
    mmap = np.zeros(64, np.int32)
    map_init(mmap)
    probs = []
    for byte in data:
        p, node = 1.0, 1
        for d in range(8):  # the match model's p(bit) on the expected path, else no opinion
            bit = (int(byte) >> (7 - d)) & 1
            e = mstate[2] | 256
            if mstate[1] > 0 and e >> (8 - d) == node:
                lb = min(16 + ((mstate[1] - 16) >> 3), 31) if mstate[1] >= 16 else mstate[1]
                expected_bit = (e >> (7 - d)) & 1
                p1 = squash(int(STRETCH[mmap[2 * lb + expected_bit] >> 19])) / 4096
            else:
                p1 = 0.5
            p *= p1 if bit else 1 - p1
            node = 2 * node + bit
        probs.append(p)
        update_cand_map(mmap, 0, mstate, 0, byte, 1023, 0, 0)
        h.push(byte)
        cand_advance(mt, mstate, 0, h.hist, h.hstate, h.mask, 6, 1, 0)
    assert max(probs[:3000]) < 0.5  # random bytes: no match yet
    assert 0 < mstate[1] <= MAX_LEN
    assert min(probs[-2000:]) > 0.99
