"""The match model's options (mix.match_recover, match_min2, match_ctx2): the candidates'
state machine on tiny histories derived by hand, their inputs, a round trip, and the
defaults leaving every existing file's header and bits alone."""

import dataclasses

import numpy as np
import pytest
from conftest import TINY_MODEL

import mambazip
from mambazip.errors import ConfigError
from mambazip.predictor import DEFAULT, SMALL, ContextMixer, MixConfig
from mambazip.predictor.counters import stretch
from mambazip.predictor.history import K_MATCHED, history_push
from mambazip.predictor.loop import layout
from mambazip.predictor.match import (
    MSTATE,
    SECOND,
    cand_advance,
    cand_inputs,
    match_context,
    update_cand_map,
)


class _Run:
    """A history and the match model's state, pushed a byte at a time as loop.py does."""

    def __init__(self, minlen=3, minlen2=0, recover=0):
        self.mask = (1 << 12) - 1
        self.hist = np.zeros(1 << 12, np.uint8)
        sizes = layout(SMALL)
        self.hstate = np.zeros(sizes["hstate"], np.int64)
        self.words = np.zeros(sizes["words"], np.uint64)
        self.mt = np.zeros(1 << 12, np.int32)
        self.mt2 = np.zeros(1 << 12, np.int32)
        self.mstate = np.zeros(MSTATE, np.int64)
        self.minlen, self.minlen2, self.recover = minlen, minlen2, recover

    def push(self, data):
        for byte in data:
            history_push(self.hist, self.hstate, self.words, self.mask, byte)
            cand_advance(self.mt, self.mstate, 0, self.hist, self.hstate, self.mask,
                         self.minlen, 1, self.recover)  # fmt: skip
            if self.minlen2:
                cand_advance(self.mt2, self.mstate, SECOND, self.hist, self.hstate, self.mask,
                             self.minlen2, self.minlen2, self.recover)  # fmt: skip

    def first(self):
        """(pointer, length, expected byte, misses) of the first candidate."""
        return tuple(int(v) for v in self.mstate[:4])

    def second(self):
        return tuple(int(v) for v in self.mstate[SECOND : SECOND + 4])


def test_without_recovery_the_first_miss_drops_the_match():
    run = _Run()
    run.push(b"abcdefgh" + b"abc")  # "abc" found after its first occurrence: t = 3, 3 bytes
    assert run.first()[:3] == (3, 3, ord("d"))
    run.push(b"de")
    assert run.first()[:3] == (5, 5, ord("f"))
    run.push(b"Z")  # a miss, and "deZ" was never seen
    assert run.first()[1] == 0
    run.push(b"gh")  # "eZg", "Zgh" never seen: still none
    assert run.first()[1] == 0


def test_recovery_keeps_following_the_candidate_past_a_miss():
    run = _Run(recover=8)
    run.push(b"abcdefgh" + b"abcde")
    assert run.first() == (5, 5, ord("f"), 0)
    run.push(b"Z")  # a miss: the pointer moves past "f", the length restarts at 1
    assert run.first() == (6, 1, ord("g"), 0b1)
    run.push(b"g")  # agrees: the miss is now two bytes back
    assert run.first() == (7, 2, ord("h"), 0b10)
    run.push(b"h")
    assert run.first() == (8, 3, ord("a"), 0b100)


def test_a_recovering_match_is_dropped_at_its_miss_limit():
    run = _Run(recover=2)
    run.push(b"abcdefgh" + b"abcde")
    run.push(b"Z")  # one miss of 2 allowed: kept
    assert run.first() == (6, 1, ord("g"), 0b1)
    run.push(b"Q")  # two misses in its last 16 bytes: dropped, its misses forgotten
    assert run.first()[1] == 0 and run.first()[3] == 0


def test_misses_older_than_16_bytes_are_forgotten():
    run = _Run(recover=8)
    run.push(b"abcdefghijklmnopqrstuvwxyz" + b"abcdeZ")
    assert run.first() == (6, 1, ord("g"), 0b1)
    run.push(b"ghijklmnopqrstu")  # 15 more bytes agree: the miss is 16 bytes back
    assert run.first() == (21, 16, ord("v"), 1 << 15)
    run.push(b"v")  # it leaves the window
    assert run.first() == (22, 17, ord("w"), 0)


def test_a_recovering_match_gives_way_to_a_candidate_that_verifies_longer():
    run = _Run(recover=8)
    # "xyzabcd" again: the match found by "xyz" (t = 3) follows it and misses at Q.
    run.push(b"xyzabcdefgh" + b"12cdeRS" + b"xyzabcdQ")
    assert run.first() == (8, 1, ord("f"), 0b1)  # the pointer past the "e" that missed
    run.push(b"f")
    assert run.first() == (9, 2, ord("g"), 0b10)
    run.push(b"cd")  # two more misses (expected "g", "h"): recovering, length 1
    assert run.first() == (11, 1, ord("1"), 0b1011)
    # Another miss, but "cde" is found after its occurrence in "12cdeRS" (t = 16), verified
    # 3 bytes back ("2" and "f" differ), longer than the recovering match's 1: it takes over.
    run.push(b"e")
    assert run.first() == (16, 3, ord("R"), 0)


def test_the_second_candidate_needs_match_min2_verified_bytes():
    run = _Run(minlen=3, minlen2=5)
    run.push(b"pqabcX" + b"zqabc")  # "qabc" in common: 4 bytes
    assert run.first()[:3] == (5, 4, ord("X"))  # found by "qab" (3 bytes), grown to 4
    assert run.second()[1] == 0  # 4 verified bytes are fewer than 5
    run.push(b"X")  # "qabcX" verifies 5 bytes ("p" and "z" differ): found
    assert run.second()[:3] == (6, 5, ord("z"))
    run.push(b"pqabc")  # dropped at "p", then found again by "pqabc", 5 bytes at t = 5
    assert run.second()[:3] == (5, 5, ord("X"))


def test_candidate_inputs_on_and_off_the_expected_path():
    """Recovery on, two candidates: the first at length 3 with misses 0b101 (2), the second
    expecting the same byte: its map entry is ((1 * 5 + 2) * 32 + 3) * 2 + bit = 454 + bit."""
    mstate = np.zeros(MSTATE, np.int64)
    mstate[:4] = 100, 3, 0b10110000, 0b101
    mstate[SECOND : SECOND + 4] = 200, 20, 0b10110000, 0
    mmap = np.zeros(2 * 64 * 5 * 3, np.int32)
    mmap[455] = 3000 << 19  # expected bit 1
    mmap[454] = 1000 << 19  # expected bit 0
    x = np.zeros((256, 4), np.int32)
    # The root: expected bit 1; node 0b11 (depth 1): expected bit 0; node 0b10 is off the path.
    assert cand_inputs(x, 0, mstate, 0, mmap, 0, 1, 0, 8, 1) == 1
    assert (x[1, 0], x[1, 1]) == (stretch(3000), 3 << 6)
    assert cand_inputs(x, 0, mstate, 0, mmap, 0, 3, 1, 8, 1) == 0
    assert (x[3, 0], x[3, 1]) == (stretch(1000), -(3 << 6))
    x[2] = 7
    assert cand_inputs(x, 0, mstate, 0, mmap, 0, 2, 1, 8, 1) == -1  # off the path: nothing
    assert (x[2, 0], x[2, 1]) == (0, 0)
    # The second candidate: length 20 (bucket 16 + 0), no misses, the first agrees: entry
    # ((1 * 5 + 0) * 32 + 16) * 2 = 352 of its map, which starts at 960.
    mmap[960 + 353] = 2500 << 19
    assert cand_inputs(x, 2, mstate, SECOND, mmap, 960, 1, 0, 8, 1) == 1
    assert (x[1, 2], x[1, 3]) == (stretch(2500), 16 << 6)


def test_a_disagreeing_other_candidate_keys_another_map_entry():
    mstate = np.zeros(MSTATE, np.int64)
    mstate[:4] = 100, 3, 0x41, 0
    mstate[SECOND : SECOND + 4] = 200, 20, 0x42, 0
    mmap = np.full(2 * 64 * 3, 2048 << 19, np.int32)
    before = mmap.copy()
    update_cand_map(mmap, 0, mstate, 0, 0x41, 1023, 0, 1)
    # Disagreeing (2), no recovery: entries (2 * 32 + 3) * 2 + bit, bits of 0x41 on its path.
    changed = np.flatnonzero(mmap != before)
    assert set(changed) <= {134, 135} and len(changed) == 2


def test_config_options_are_checked():
    with pytest.raises(ConfigError):
        MixConfig(match_min2=6)  # not longer than match_min
    with pytest.raises(ConfigError):
        MixConfig(match_ctx2=True)  # no second candidate
    MixConfig(match_ctx2=True, level=5)  # level 5 has one
    with pytest.raises(ConfigError):
        MixConfig(match_recover=17)


def test_the_options_at_their_defaults_leave_header_and_tables_alone():
    # the level before the options, match_recover at its default, 0 (the default preset takes 6)
    level4 = dataclasses.replace(DEFAULT, level=4, match_recover=0)
    for key in ("match_recover", "match_min2", "match_ctx2"):
        assert key not in level4.to_dict()
    sizes = layout(level4)
    assert (sizes["mmap"], sizes["mstate"], sizes["mt2"]) == (64, 3, 0)
    on = dataclasses.replace(level4, match_recover=8, match_min2=16, match_ctx2=True)
    assert MixConfig.from_dict(on.to_dict()) == on
    sizes = layout(on)  # a second table, two maps of 64 x 5 x 3, two candidates' states
    assert (sizes["mt2"], sizes["mmap"], sizes["mstate"]) == (1 << 22, 1920, MSTATE)


def test_memory_bytes_counts_the_match_options():
    on = dataclasses.replace(SMALL, match_recover=8, match_min2=16)
    mixer = ContextMixer(on)
    assert on.memory_bytes() == sum(b.nbytes for b in mixer.buffers.values())
    assert on.memory_bytes() > SMALL.memory_bytes() + (4 << SMALL.match_log)


def test_round_trip_with_the_match_options(sample):
    settings = mambazip.resolve_settings("default", model=TINY_MODEL)
    mix = dataclasses.replace(SMALL, mamba=True, level=4, match_recover=8, match_min2=12,
                              match_ctx2=True)  # fmt: skip
    settings = dataclasses.replace(settings, mix=mix)
    # Repeats with a changed byte every 40: the recovering match follows them.
    data = bytearray(sample * 2)
    data[len(sample) :: 40] = b"#" * len(data[len(sample) :: 40])
    blob = mambazip.compress(bytes(data), settings)
    assert mambazip.decompress(blob) == bytes(data)
    plain = dataclasses.replace(mix, match_recover=0, match_min2=0, match_ctx2=False)
    plain = dataclasses.replace(settings, mix=plain)
    assert mambazip.compress(bytes(data), plain) != blob


def test_the_matched_context_tells_a_recovering_match_from_a_fresh_one():
    kinds = np.array([K_MATCHED], np.int64)
    mstate = np.zeros(MSTATE, np.int64)
    mstate[:4] = 100, 1, 0x41, 0
    fresh, recovering, old = (np.zeros(1, np.uint64) for _ in range(3))
    match_context(fresh, kinds, mstate, 2)
    match_context(old, kinds, mstate[:3], 0)
    assert fresh[0] == old[0]  # not recovering: the hash of files before the option
    mstate[3] = 0b100
    match_context(recovering, kinds, mstate, 2)
    assert recovering[0] != fresh[0]
    match_context(fresh, kinds, mstate, 0)  # recovery off: the flag is not read
    assert fresh[0] == old[0]


def test_level_5_is_level_4_with_recovery_3_and_a_second_candidate_of_20_bytes():
    five = dataclasses.replace(SMALL, level=5)
    four = dataclasses.replace(SMALL, level=4, match_recover=3, match_min2=20)
    assert (five.match_recovery, five.match_hash2) == (3, 20)
    assert layout(five) == layout(four)
    data = np.frombuffer(b"the cat sat on the mat; the cat sat on a hat. " * 30, np.uint8)
    tables = []
    for cfg in (five, four):
        mixer = ContextMixer(cfg, nibbles=True)
        mixer.prime()
        tables.append(mixer.advance(data)[0])
    assert np.array_equal(tables[0], tables[1])
    # Its own fields still win where set.
    assert dataclasses.replace(five, match_recover=8, match_min2=16).match_hash2 == 16
    assert dataclasses.replace(five, match=False).match_columns == 0
