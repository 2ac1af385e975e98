"""The byte histories (issue 21, item 3; mix.byte_history): each first-nibble slot keeps the
two distinct bytes seen there before its last one, moved to the front as bytes come; an input
per context model reads an adaptive map by the way each of the three bytes goes at the node.
Worked by hand on short byte sequences; the decoder follows; old headers are left alone. And
mix.half_inputs, the history and run inputs at half, and level 7, which has both."""

import dataclasses

import numpy as np
from test_predictor_text import coded_tables, decoder_follows

from mambazip.predictor import DEFAULT, SMALL, ContextMixer, MixConfig
from mambazip.predictor.context import (
    BYTE_ENTRIES,
    _older_bytes,
    _push_byte,
    _read_bytes,
)
from mambazip.predictor.counters import stretch
from mambazip.predictor.loop import V_BH, V_BIDX, V_X, group_column, layout, view

ON = dataclasses.replace(SMALL, level=6, byte_history=True)


def _history(seq):
    """(last, b2, b3) of one slot after the bytes seq, through _push_byte as the update runs
    it (the slot is fresh before the first)."""
    bh = np.zeros((1, 2), np.uint8)
    last = None
    for byte in seq:
        _push_byte(bh, 0, last is not None, 0 if last is None else last, byte)
        last = byte
    return last, int(bh[0, 0]), int(bh[0, 1])


def test_a_fresh_slot_knows_no_older_byte():
    assert _history([7]) == (7, 7, 7)
    assert _older_bytes(np.array([[7, 7]], np.uint8), 0, 7) == 0


def test_a_repeated_byte_changes_no_older_byte():
    assert _history([5, 9, 9, 9]) == (9, 5, 5)


def test_the_older_bytes_are_the_last_distinct_ones_most_recent_first():
    assert _history([1, 2, 3]) == (3, 2, 1)
    assert _history([1, 2, 3, 1]) == (1, 3, 2)  # 1 leaves the list, 3 enters it first
    assert _history([1, 2, 3, 1, 3]) == (3, 1, 2)  # 3 was the newer: 2 stays third
    assert _history([1, 2, 3, 4]) == (4, 3, 2)  # 1 falls off


def test_an_older_byte_equal_to_a_newer_one_is_not_known():
    bh = np.array([[2, 2]], np.uint8)  # after 2, 3: b2 = 2, b3 = 2 (a copy: unknown)
    assert _older_bytes(bh, 0, 3) == (2 | 256) << 12
    bh = np.array([[2, 1]], np.uint8)
    assert _older_bytes(bh, 0, 3) == ((2 | 256) << 12) | ((1 | 256) << 21)


def _read(last, node, way):
    x = np.zeros((256, 3), np.int32)
    bmaps = np.full(3 * BYTE_ENTRIES, 2048 << 19, np.int32)
    bidx = np.full((256, 1), -7, np.int32)
    hs = (None,) * 14 + (2, bmaps, bidx)
    depth = node.bit_length() - 1
    _read_bytes(x, hs, 0, node, depth, way, last)
    return int(bidx[node, 0]), int(x[node, 2])


def test_the_input_reads_the_map_of_the_ways_the_three_bytes_go():
    # last 'a' = 0110 0001 (its run, 2, keys nothing here); b2 'b' = 0110 0010; b3 'q' =
    # 0111 0001.
    last = ord("a") | (2 << 8) | ((ord("b") | 256) << 12) | ((ord("q") | 256) << 21)
    # Node 0b1011 (depth 3, "011"): 'a' and 'b' go on with 0 (way 1), 'q' with 1 (way 2).
    assert _read(last, 0b1011, 1) == ((9 * 1 + 3 * 1 + 2) * 8 + 3, 0)
    # Node 0b1_0110_00 (depth 6): 'a' goes 0, 'b' goes 1, 'q' left before it.
    assert _read(last, 0b1011000, 1) == ((9 * 1 + 3 * 2 + 0) * 8 + 6, 0)


def test_the_input_is_half_the_stretch_of_its_map():
    last = ord("a") | ((ord("b") | 256) << 12)
    x = np.zeros((256, 3), np.int32)
    bmaps = np.full(3 * BYTE_ENTRIES, 2048 << 19, np.int32)
    e = (9 * 1 + 3 * 1) * 8 + 3  # node 0b1011, as above
    bmaps[e] = 3000 << 19  # p 3000/4096
    hs = (None,) * 14 + (2, bmaps, np.zeros((256, 1), np.int32))
    _read_bytes(x, hs, 0, 0b1011, 3, 1, last)
    assert stretch(3000) > 200
    assert x[0b1011, 2] == stretch(3000) >> 1


def test_no_input_where_no_byte_passes_the_node():
    last = ord("a") | ((ord("b") | 256) << 12)
    assert _read(last, 0b11, 0) == (-1, 0)  # "1": none of them starts with a 1
    assert _read(-1, 1, 0) == (-1, 0)  # the context was never seen


def test_each_model_records_the_entry_it_read_on_a_real_stream():
    mixer = ContextMixer(ON)
    mixer.prime()
    mixer.advance(np.frombuffer(b"abaca", np.uint8))  # o1's context "a": 'b', then 'c'
    bidx = view(mixer.buffers, mixer.offs, V_BIDX).reshape(256, -1)
    o1 = 1
    # Next byte after "a": o1's last byte 'c', older 'b'. Node 0b1_0110_0 (depth 5):
    # 'c' = 0110 0011 and 'b' = 0110 0010 both go on with 0.
    assert bidx[0b101100, o1] == o1 * BYTE_ENTRIES + (9 * 1 + 3 * 1) * 8 + 5
    # Node 0b1_0110_001 (depth 7): 'c' goes 1, 'b' goes 0.
    assert bidx[0b10110001, o1] == o1 * BYTE_ENTRIES + (9 * 2 + 3 * 1) * 8 + 7
    # Slot by slot, the update kept 'b' as the older byte of o1's first slot for "a".
    assert ord("b") in view(mixer.buffers, mixer.offs, V_BH)


def test_byte_history_adds_one_input_group_and_its_tables():
    assert ON.slot_bytes and ON.input_groups[-1] == "bytes"
    assert group_column(ON, "bytes") == len(ON.context_kinds) * (len(ON.input_groups) - 1)
    sizes = layout(ON)
    assert sizes["bh"] == 2 << ON.ctx_log
    assert sizes["bmaps"] == len(ON.context_kinds) * BYTE_ENTRIES
    no_last = dataclasses.replace(SMALL, byte_history=True, histories=True)
    assert not no_last.slot_bytes and layout(no_last)["bh"] == 0


def test_the_decoder_follows_with_byte_histories():
    decoder_follows(ON, nibbles=True)
    decoder_follows(ON, nibbles=False)


def test_byte_histories_change_the_tables():
    data = np.frombuffer(bytes(range(40, 90)) * 20 + b"abcabdabeabf" * 30, np.uint8)
    tables = [coded_tables(cfg, data) for cfg in (ON, dataclasses.replace(ON, byte_history=False))]
    assert not np.array_equal(tables[0], tables[1])


def test_the_fields_at_their_defaults_leave_older_headers_alone():
    for level in range(8):
        cfg = dataclasses.replace(DEFAULT, level=level)
        assert {"byte_history", "half_inputs"}.isdisjoint(cfg.to_dict())
    on = dataclasses.replace(DEFAULT, byte_history=True, half_inputs=True)
    assert (on.to_dict()["byte_history"], on.to_dict()["half_inputs"]) == (True, True)
    assert MixConfig.from_dict(on.to_dict()) == on


def _inputs_after(cfg, text):
    mixer = ContextMixer(cfg)
    mixer.prime()
    mixer.advance(np.frombuffer(text, np.uint8))
    return view(mixer.buffers, mixer.offs, V_X).reshape(256, -1)


def test_half_inputs_halve_the_history_and_run_inputs_alone():
    """The maps learn from the bits alone, whatever the combiner does with their inputs: after
    the same bytes, each history and run input is the other mixer's shifted right by one."""
    full = dataclasses.replace(SMALL, level=6)
    half = dataclasses.replace(full, half_inputs=True)
    assert half.halved and not full.halved
    text = b"the cat sat on the mat; the cat sat on a hat. " * 8
    x_full, x_half = _inputs_after(full, text), _inputs_after(half, text)
    for group in ("history", "run"):
        col = group_column(full, group)
        cols = slice(col, col + len(full.context_kinds))
        assert np.any(x_full[1:, cols] != 0)
        assert np.array_equal(x_half[1:, cols], x_full[1:, cols] >> 1)
    counters = slice(0, len(full.context_kinds))
    assert np.array_equal(x_half[1:, counters], x_full[1:, counters])


def test_level_7_is_level_6_with_the_byte_histories_and_half_inputs():
    seven = dataclasses.replace(SMALL, level=7)
    six = dataclasses.replace(SMALL, level=6, byte_history=True, half_inputs=True)
    assert (seven.slot_bytes, seven.halved) == (True, True)
    assert not dataclasses.replace(SMALL, level=6).slot_bytes
    assert layout(seven) == layout(six)
    data = np.frombuffer(b"the cat sat on the mat; the cat sat on a hat. " * 30, np.uint8)
    tables = [coded_tables(cfg, data) for cfg in (seven, six, dataclasses.replace(SMALL, level=6))]
    assert np.array_equal(tables[0], tables[1])
    assert not np.array_equal(tables[0], tables[2])
