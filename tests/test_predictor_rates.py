"""Each weight row's own learning rate (``mix.row_rates``, issue 21 item 5): a row of a
combiner steps at a multiple of the rate that falls with the bits it has been picked for, in
place of the rate's decay by bytes. Off by default, so files written before it keep their
bits."""

import dataclasses

import numpy as np
import pytest
from test_predictor_text import decoder_follows

from mambazip.predictor import SMALL, ContextMixer, MixConfig
from mambazip.predictor.combiner import W_ONE, row_scale, train
from mambazip.predictor.loop import (
    D_LR_DECAY,
    D_ROWHALF,
    N_FINAL_ROWS,
    ROW_C0,
    V_WFN,
    V_WN,
    layout,
    view,
    weight_rows,
)

ROWS = dataclasses.replace(SMALL, row_rates=8)


def test_a_row_steps_at_five_times_the_rate_at_first_and_three_times_after_half():
    counts = np.zeros(2, np.int32)
    # 1 + 4 half / (half + c): c = 0 gives 5, c = half gives 3, c = 3 half gives 2.
    assert row_scale(counts, 1, 256) == 5 * W_ONE
    assert counts.tolist() == [0, 1]  # the step is counted
    counts[1] = 256
    assert row_scale(counts, 1, 256) == 3 * W_ONE
    counts[1] = 768
    assert row_scale(counts, 1, 256) == 2 * W_ONE
    counts[1] = 100
    # 4 * 65536 * 256 = 67108864 = 356 * 188508 + 16: the extra is 188508 (floored)
    assert row_scale(counts, 1, 256) == W_ONE + 188508
    assert counts[1] == 101


def test_without_row_rates_the_scale_is_one_and_nothing_is_counted():
    counts = np.zeros(1, np.int32)
    assert row_scale(counts, 0, 0) == W_ONE
    assert counts[0] == 0


def test_a_scaled_step_scales_the_error_before_the_weights_move():
    w = np.zeros((1, 1), np.int32)
    x = np.zeros((2, 1), np.int32)
    x[1, 0] = 256
    # s = 0: p = 2048, bit 1: e = 2048; lr 2, scale 3: err = (2048 * 2 * 3 W_ONE) >> 16 =
    # 12288; w += (256 * 12288 + 8192) >> 14 = 192 (at scale 1: (1048576 + 8192) >> 14 = 64).
    train(w, 0, x, 1, 1, 0, 1, 2, 0, 0, 0, 0, 3 * W_ONE)
    assert w[0, 0] == 192
    train(w, 0, x, 1, 1, 0, 1, 2, 0, 0, 0, 0)
    assert w[0, 0] == 192 + 64


def test_row_rates_replace_the_rate_decay_by_bytes():
    level1 = dataclasses.replace(SMALL, level=1)
    assert ContextMixer(level1).dims[D_LR_DECAY] == 1
    mixer = ContextMixer(dataclasses.replace(level1, row_rates=8))
    assert mixer.dims[D_LR_DECAY] == 0 and mixer.dims[D_ROWHALF] == 256
    assert ContextMixer(SMALL).dims[D_ROWHALF] == 0


def test_the_row_counts_take_memory_only_when_on():
    assert layout(SMALL)["wn"] == 0 and layout(SMALL)["wfn"] == 0
    assert layout(ROWS)["wn"] == weight_rows(ROWS) and layout(ROWS)["wfn"] == N_FINAL_ROWS
    assert ROWS.memory_bytes() == SMALL.memory_bytes() + 4 * (weight_rows(ROWS) + N_FINAL_ROWS)


def test_a_byte_counts_a_step_on_each_row_its_eight_nodes_picked():
    mixer = ContextMixer(ROWS)
    mixer.prime()
    mixer.advance(np.frombuffer(b"A", np.uint8))
    wn = view(mixer.buffers, mixer.offs, V_WN)
    path = [(0x41 | 256) >> (8 - d) for d in range(8)]  # nodes 1, 2, 4, 8, 16, 32, 65, 130
    assert [int(wn[ROW_C0 + node]) for node in path] == [1] * 8
    # the c0 rows of the other nodes were not picked
    assert int(wn[ROW_C0 : ROW_C0 + 256].sum()) == 8
    # the final combiner's rows are by depth at level 0: one step each
    assert view(mixer.buffers, mixer.offs, V_WFN)[:8].tolist() == [1] * 8


def test_row_rates_are_left_out_of_the_settings_when_off():
    assert "row_rates" not in SMALL.to_dict()
    assert ROWS.to_dict()["row_rates"] == 8
    assert MixConfig.from_dict(ROWS.to_dict()) == ROWS


@pytest.mark.parametrize("nibbles", [False, True])
def test_decoder_steps_equal_advance_at_level_6(nibbles):
    decoder_follows(dataclasses.replace(SMALL, level=6), nibbles)


def test_level_6_is_level_5_with_row_rates_8_and_the_history_maps_by_depth():
    six = dataclasses.replace(SMALL, level=6)
    five = dataclasses.replace(SMALL, level=5, row_rates=8, history_depth=True)
    assert (six.row_rate_log, six.history_by_depth) == (8, True)
    assert dataclasses.replace(SMALL, level=5).row_rate_log == 0
    assert dataclasses.replace(six, row_rates=10).row_rate_log == 10
    assert layout(six) == layout(five)
    data = np.frombuffer(b"the cat sat on the mat; the cat sat on a hat. " * 30, np.uint8)
    tables = []
    for cfg in (six, five, dataclasses.replace(SMALL, level=5)):
        mixer = ContextMixer(cfg, nibbles=True)
        mixer.prime()
        tables.append(mixer.advance(data)[0])
    assert np.array_equal(tables[0], tables[1])
    assert not np.array_equal(tables[0], tables[2])
