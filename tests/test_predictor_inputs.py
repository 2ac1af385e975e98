"""More combiner inputs per context model (issue 21, items 3 and 6): beside each model's counter
and bit-history inputs, its history's probability as a confidence (``mix.conf_inputs``), a
deterministic-history input (``mix.det_inputs``) and the bit its last byte expects by its run
(``mix.run_inputs``). Each is off by default, so files written before them keep their bits."""

import dataclasses

import numpy as np
import pytest

from mambazip.predictor import SMALL, ContextMixer, MixConfig
from mambazip.predictor.context import RUN_ENTRIES, _deterministic
from mambazip.predictor.loop import V_PARTS, V_RIDX, V_X, layout, n_inputs, view, weight_rows

LAST = dataclasses.replace(SMALL, histories=True, last_byte=True, runs=True)
O1 = 1  # the order-1 model's index


def _x_after(cfg, text):
    """The combiner inputs of the prediction that follows text, (256, NIN)."""
    mixer = ContextMixer(cfg)
    mixer.prime()
    mixer.advance(np.frombuffer(text, np.uint8))
    return mixer, view(mixer.buffers, mixer.offs, V_X).reshape(256, -1)


def test_new_input_fields_are_left_out_of_the_settings_at_their_defaults():
    assert set(SMALL.to_dict()).isdisjoint({"conf_inputs", "det_inputs", "run_inputs"})
    cfg = dataclasses.replace(LAST, conf_inputs=1, det_inputs=2, run_inputs=1)
    assert MixConfig.from_dict(cfg.to_dict()) == cfg


def test_input_groups_come_in_field_order_and_need_what_they_read():
    assert SMALL.input_groups == ("counter",)
    assert dataclasses.replace(SMALL, conf_inputs=1, det_inputs=1).input_groups == ("counter",)
    everything = dataclasses.replace(LAST, conf_inputs=1, det_inputs=1, run_inputs=1)
    assert everything.input_groups == ("counter", "history", "conf", "det", "run")
    no_last = dataclasses.replace(SMALL, histories=True, run_inputs=1)
    assert no_last.input_groups == ("counter", "history")  # the run input reads the last byte


def test_each_input_group_adds_a_column_per_model_and_trust_attributes_it_to_its_model():
    cfg = dataclasses.replace(LAST, conf_inputs=1, det_inputs=1, run_inputs=1)
    c = len(cfg.context_kinds)
    assert n_inputs(cfg) == n_inputs(LAST) + 3 * c
    mixer = ContextMixer(cfg)
    parts = view(mixer.buffers, mixer.offs, V_PARTS)
    assert parts[: 5 * c].tolist() == list(range(c)) * 5
    assert parts[5 * c : 5 * c + 2].tolist() == [c, c]  # the match model's two
    trust = np.zeros((4, len(cfg.part_names)), np.float32)
    mixer.prime()
    mixer.advance(np.frombuffer(b"abab", np.uint8), trust=trust)
    assert np.allclose(trust[1:].sum(axis=1), 1.0)  # the first byte's inputs are all 0


def test_the_run_maps_take_memory_only_when_on():
    assert layout(LAST)["rmaps"] == 0 and layout(LAST)["ridx"] == 0
    cfg = dataclasses.replace(LAST, run_inputs=1)
    c = len(cfg.context_kinds)
    assert layout(cfg)["rmaps"] == c * RUN_ENTRIES and layout(cfg)["ridx"] == 256 * c
    # int32: the maps and their entries, a column per model in the weights and x; int64: the
    # column's part
    more = 4 * c * (RUN_ENTRIES + 256 + weight_rows(cfg) + 256) + 8 * c
    assert cfg.memory_bytes() == LAST.memory_bytes() + more


@pytest.mark.parametrize(
    "h, expected",
    [
        (0, 0),  # never seen
        (0b10, -((4096 - 1000) >> 1)),  # one 0
        (0b11, 1000 >> 1),  # one 1
        (0b1000, -((4096 - 1000) >> 1)),  # three 0s
        (0b1111111, 1000 >> 1),  # six 1s
        (0b1010, 0),  # both values seen
        (0b1111110, 0),
    ],
)
def test_a_deterministic_history_gives_its_signed_probability(h, expected):
    assert _deterministic(h, 1000, -300, 2) == expected
    assert _deterministic(h, 1000, -300, 1) == (-300 if expected else 0)


def test_confidence_and_deterministic_inputs_by_hand():
    # After "aba", o1's context "a" saw "b" (0110 0010) once: its node 1 holds history 0b10,
    # node 2 0b11, node 3 none; those map entries are still at their start, 1024 and 3072.
    cfg = dataclasses.replace(LAST, runs=False, conf_inputs=1, det_inputs=2)
    _, x = _x_after(cfg, b"aba")
    c = len(cfg.context_kinds)
    conf, det = 2 * c + O1, 3 * c + O1
    assert [x[n, conf] for n in (1, 2, 3)] == [(1024 - 2048) >> 1, (3072 - 2048) >> 1, 0]
    assert [x[n, det] for n in (1, 2, 3)] == [-((4096 - 1024) >> 1), 3072 >> 1, 0]
    _, x1 = _x_after(dataclasses.replace(cfg, det_inputs=1), b"aba")
    assert [x1[n, det] for n in (1, 2, 3)] == [-281, 282, 0]  # STRETCH[1024], [3072]


def test_run_input_is_the_bit_the_last_byte_expects_learned_by_run_and_depth():
    # o1's context "a" saw "b" (0110 0010), then "c" (0110 0011) while expecting b: the run
    # map entries of run 0 at depths 0 and 1 learned one bit each, 0 and 1, from 1/2 at rate
    # 1 / 1.5: p 682 and 3413, stretched -412 and 412. Node 3 is off c's path: no input.
    cfg = dataclasses.replace(LAST, run_inputs=1)
    mixer, x = _x_after(cfg, b"abaca")
    c = len(cfg.context_kinds)
    ridx = view(mixer.buffers, mixer.offs, V_RIDX).reshape(256, -1)
    base = O1 * RUN_ENTRIES
    assert ridx[1, O1] == base + (0 << 1) + 0  # depth 0, c's bit there is 0
    assert ridx[2, O1] == base + (1 << 1) + 1  # depth 1, c's bit there is 1
    assert ridx[3, O1] == -1
    assert [x[n, 2 * c + O1] for n in (1, 2, 3)] == [-412, 412, 0]


def test_run_input_is_keyed_by_the_last_byte_s_run():
    cfg = dataclasses.replace(LAST, run_inputs=1)
    mixer, _ = _x_after(cfg, b"abababa")  # "a" followed by "b" three times: run 2
    ridx = view(mixer.buffers, mixer.offs, V_RIDX).reshape(256, -1)
    assert ridx[1, O1] == O1 * RUN_ENTRIES + ((2 * 8 + 0) << 1) + 0


@pytest.mark.parametrize("nibbles", [False, True])
def test_decoder_steps_equal_advance_with_every_input(nibbles):
    cfg = dataclasses.replace(LAST, conf_inputs=1, det_inputs=2, run_inputs=1)
    data = np.frombuffer(b"The cat sat. The cat sat on the mat.\n" * 8, np.uint8)
    enc, dec = ContextMixer(cfg, nibbles=nibbles), ContextMixer(cfg, nibbles=nibbles)
    enc.prime()
    dec.prime()
    freqs, _ = enc.advance(data)
    for i, byte in enumerate(data):
        assert np.array_equal(dec.freq, freqs[i, : dec.freq.shape[0]]), i
        if nibbles:
            dec.advance_nibble(byte >> 4)
        dec.advance_byte(byte)
    assert np.array_equal(dec.freq, enc.freq)
