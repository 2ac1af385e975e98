"""More combiner inputs per context model and a longer SSE chain (issue 21, items 3 and 6):
beside each model's counter and bit-history inputs, its history's probability as a confidence
(``mix.conf_inputs``), a deterministic-history input (``mix.det_inputs``) and the bit its last
byte expects by its run (``mix.run_inputs``); an order-4 hashed APM (``mix.sse_order4``) and
APM rates by a count per bucket (``mix.apm_counts``), 16-bit node probabilities
(``mix.wide_final``). Each is off by default, so files written
before them keep their bits."""

import dataclasses

import numpy as np
import pytest

from mambazip.errors import ConfigError
from mambazip.predictor import SMALL, ContextMixer, MixConfig
from mambazip.predictor.apm import apm_predict, apm_predict_bits, apm_update_counted
from mambazip.predictor.context import RUN_ENTRIES, _deterministic, _history_kind
from mambazip.predictor.loop import (
    MATCH_APM,
    N_APMS,
    V_AIDX,
    V_AIDX4,
    V_APM1,
    V_APM2,
    V_APM4,
    V_APMS,
    V_P12,
    V_PARTS,
    V_RIDX,
    V_SF,
    V_X,
    group_column,
    layout,
    n_inputs,
    nibble_table,
    nibble_table_bits,
    view,
    weight_rows,
)

LAST = dataclasses.replace(SMALL, histories=True, last_byte=True, runs=True)
O1 = 1  # the order-1 model's index


def _x_after(cfg, text):
    """The combiner inputs of the prediction that follows text, (256, NIN)."""
    mixer = ContextMixer(cfg)
    mixer.prime()
    mixer.advance(np.frombuffer(text, np.uint8))
    return mixer, view(mixer.buffers, mixer.offs, V_X).reshape(256, -1)


def test_new_input_fields_are_left_out_of_the_settings_at_their_defaults():
    later = {"conf_inputs", "det_inputs", "run_inputs", "sse_order4", "apm_counts", "wide_final"}
    assert set(SMALL.to_dict()).isdisjoint(later)
    cfg = dataclasses.replace(
        LAST, conf_inputs=1, det_inputs=2, run_inputs=1, sse_order4=True, apm_counts=2
    )
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


@pytest.mark.parametrize(
    ("h", "expected"),
    [
        (0b10, -((4096 - 1000) >> 4)),  # one 0: -193
        (0b1111111, 1000 >> 4),  # six 1s: 62
        (0b1010, 0),  # both values seen
    ],
)
def test_mode_3_gives_the_signed_probability_an_eighth_as_loud(h, expected):
    assert _deterministic(h, 1000, -300, 3) == expected


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
    _, x3 = _x_after(dataclasses.replace(cfg, det_inputs=3), b"aba")
    assert [x3[n, det] for n in (1, 2, 3)] == [-192, 192, 0]  # 3072 >> 4


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


@pytest.mark.parametrize(
    "h, kind", [(0, 0), (0b10, 1), (0b11, 1), (0b1000, 1), (0b1111111, 1), (0b101, 2), (0b1110, 2)]
)
def test_a_history_holds_no_bit_one_value_or_both(h, kind):
    assert _history_kind(h) == kind


def test_run_inputs_2_keys_the_run_map_by_what_the_node_has_seen_too():
    # As in the test above: o1's node 1 saw the first bits of b and c (0, 0), node 2 their
    # second bits (1, 1): one value each, map 1 of 3 per model.
    cfg = dataclasses.replace(LAST, run_inputs=2)
    mixer, _ = _x_after(cfg, b"abaca")
    ridx = view(mixer.buffers, mixer.offs, V_RIDX).reshape(256, -1)
    base = O1 * 3 * RUN_ENTRIES + RUN_ENTRIES
    assert ridx[1, O1] == base + (0 << 1) + 0
    assert ridx[2, O1] == base + (1 << 1) + 1
    assert layout(cfg)["rmaps"] == 3 * layout(dataclasses.replace(cfg, run_inputs=1))["rmaps"]


@pytest.mark.parametrize("nibbles", [False, True])
def test_decoder_steps_equal_advance_with_every_input_and_apm(nibbles):
    cfg = dataclasses.replace(
        LAST,
        conf_inputs=1,
        det_inputs=2,
        run_inputs=1,
        sse=True,
        sse_order4=True,
        apm_counts=1,
        wide_final=True,
    )
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


def test_a_counted_apm_bucket_moves_by_one_over_count_plus_2_until_2_to_the_minus_rate():
    t = np.full(1, 32768, np.uint16)
    n = np.zeros(1, np.uint8)
    seen = []
    for _ in range(4):
        apm_update_counted(t, n, 0, 1, 2)
        seen.append((int(t[0]), int(n[0])))
    # 32768 + 32767 // 2; + 16384 // 3; + 10923 // 4 (the count stops at 2^2 - 2); + 8193 // 4
    assert seen == [(49151, 1), (54612, 2), (57342, 2), (59390, 2)]


def test_apm_counts_take_a_byte_per_bucket_of_the_context_side_apms():
    cfg = dataclasses.replace(SMALL, sse=True, sse_order4=True, apm_counts=1)
    sizes = layout(cfg)
    assert sizes["apm1n"] == sizes["apm1"] and sizes["apm2n"] == sizes["apm2"]
    assert sizes["apmsn"] == sizes["apms"] and sizes["apm4n"] == sizes["apm4"]
    assert layout(SMALL)["apm1n"] == 0 and layout(SMALL)["apm4"] == 0
    assert sizes["apm4"] == (1 << cfg.apm_log) * 33


def _o4_context(text):
    cfg = dataclasses.replace(SMALL, sse=True, sse_order4=True)
    mixer = ContextMixer(cfg)
    mixer.prime()
    mixer.advance(np.frombuffer(text, np.uint8))
    u = int(view(mixer.buffers, mixer.offs, V_SF)[1]) + 2048
    aidx4 = int(view(mixer.buffers, mixer.offs, V_AIDX4)[1])
    assert aidx4 % 33 == (u >> 7) + ((u & 127) >> 6)  # the nearer bucket of node 1's
    return aidx4 // 33 ^ 1  # the context, the node taken out


def test_the_order_4_apm_is_keyed_by_the_last_4_bytes():
    assert _o4_context(b"xabcd") == _o4_context(b"yabcd")
    assert _o4_context(b"xabcd") != _o4_context(b"xzbcd")
    assert _o4_context(b"xabcd") != _o4_context(b"xabcz")


def test_with_the_order_4_apm_the_probability_coded_is_the_mean_of_five_apms():
    cfg = dataclasses.replace(SMALL, level=2, sse_order4=True)  # level 2: the APMs alone
    mixer = ContextMixer(cfg)
    mixer.prime()
    mixer.advance(np.frombuffer(b"abcabcabdabc", np.uint8))
    b, offs = mixer.buffers, mixer.offs
    aidx = view(b, offs, V_AIDX).reshape(256, N_APMS)
    s = int(view(b, offs, V_SF)[1])
    tables = {0: V_APM1, 1: V_APM2, 4: V_APMS, 5: V_APMS}
    a = [int(apm_predict(view(b, offs, v), int(aidx[1, k]) // 33, s)[0]) for k, v in tables.items()]
    a.append(int(apm_predict(view(b, offs, V_APM4), int(view(b, offs, V_AIDX4)[1]) // 33, s)[0]))
    assert view(b, offs, V_P12)[1] == (sum(a) + 2) // 5
    assert layout(cfg)["apms"] == ((1 << cfg.apm_log) + MATCH_APM) * 33


def test_a_wide_final_probability_is_the_mean_of_the_apms_in_16_bits():
    cfg = dataclasses.replace(SMALL, level=2, wide_final=True)
    mixer = ContextMixer(cfg)
    mixer.prime()
    mixer.advance(np.frombuffer(b"abcabcabdabc" * 4, np.uint8))
    b, offs = mixer.buffers, mixer.offs
    aidx = view(b, offs, V_AIDX).reshape(256, N_APMS)
    s = int(view(b, offs, V_SF)[1])
    tables = {0: V_APM1, 1: V_APM2, 4: V_APMS, 5: V_APMS}
    a = [int(apm_predict_bits(view(b, offs, v), int(aidx[1, k]) // 33, s, 16)[0])
         for k, v in tables.items()]  # fmt: skip
    assert view(b, offs, V_P12)[1] == (sum(a) + 2) // 4
    assert any(v & 15 for v in a)  # finer than 12 bits


def test_an_apm_in_16_bits_is_its_12_bit_probability_refined():
    t = (np.arange(66, dtype=np.int64) * 977 % 65536).astype(np.uint16)
    for st in (-2047, -1000, -1, 0, 63, 64, 65, 1500, 2047):
        p12, i12 = apm_predict(t, 1, st)
        p16, i16 = apm_predict_bits(t, 1, st, 16)
        assert i12 == i16 and min(max(p16 >> 4, 1), 4095) == p12


def test_the_16_bit_split_of_a_12_bit_probability_shifted_is_the_12_bit_split():
    rng = np.random.default_rng(5)
    p12 = rng.integers(1, 4096, 256).astype(np.int32)
    for nib in (-1, 7):
        a, b = np.zeros(32, np.int32), np.zeros(32, np.int32)
        nibble_table(a, 0, np.zeros(32, np.int64), p12, nib)
        nibble_table_bits(b, 0, np.zeros(32, np.int64), p12 << 4, nib, 16)
        assert np.array_equal(a, b) and a[:16].sum() == 1 << 24


def test_level_4_is_level_3_with_the_run_inputs_and_the_wide_final_probability():
    level = dataclasses.replace(SMALL, level=4)
    fields = dataclasses.replace(SMALL, level=3, run_inputs=1, wide_final=True)
    assert level.input_groups == fields.input_groups == ("counter", "history", "run")
    assert level.context_kinds == fields.context_kinds
    data = np.frombuffer(b"level one, level two\n" * 40, np.uint8)
    a, b = ContextMixer(level, nibbles=True), ContextMixer(fields, nibbles=True)
    a.prime()
    b.prime()
    assert np.array_equal(a.advance(data)[0], b.advance(data)[0])
    assert level.memory_bytes() == fields.memory_bytes()
    assert view(a.buffers, a.offs, V_P12).max() > 4095  # 16-bit probabilities


def test_level_4_run_inputs_by_hand():
    # The case of test_run_input_is_the_bit_the_last_byte_expects_learned_by_run_and_depth,
    # with every part of level 4: o1's run inputs at nodes 1, 2, 3 are STRETCH[682],
    # STRETCH[3413] and none; its column is after the counter and history inputs.
    cfg = dataclasses.replace(SMALL, level=4)
    _, x = _x_after(cfg, b"abaca")
    col = group_column(cfg, "run")
    assert col == 2 * len(cfg.context_kinds)
    assert [x[n, col + O1] for n in (1, 2, 3)] == [-412, 412, 0]


def test_level_8_is_refused():
    with pytest.raises(ConfigError, match="level"):
        MixConfig.from_dict({**SMALL.to_dict(), "level": 8})


def test_decoder_steps_equal_advance_at_level_4_with_the_mamba():
    cfg = dataclasses.replace(
        SMALL, mamba=True, mamba_sel=2, mamba_eapm=1, mamba_lr=4, level=4, combiner_lr=4
    )  # the default preset's form
    rng = np.random.default_rng(4)
    data = rng.integers(0, 4, 600).astype(np.uint8) + 97
    pdfs = (rng.random((data.size + 1, 256)) ** 6).astype(np.float32)
    enc, dec = ContextMixer(cfg, nibbles=True), ContextMixer(cfg, nibbles=True)
    enc.prime(pdfs[0])
    dec.prime(pdfs[0])
    freqs, p = enc.advance(data, pdfs[1:])
    for i, byte in enumerate(data):
        assert np.array_equal(dec.freq, freqs[i, :16]), i
        dec.advance_nibble(byte >> 4)
        assert np.array_equal(dec.freq_low, freqs[i, 16:]), i
        dec.advance_byte(byte, pdfs[i + 1])
    assert np.array_equal(dec.freq, enc.freq)
    assert -np.log2(p).sum() / data.size < 2.5  # four letters: it learns them
