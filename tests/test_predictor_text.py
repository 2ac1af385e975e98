"""The text side of the context models (issue 21, items 3-6 in part): the extra contexts chosen
in ``mix.contexts`` (orders 7 and 8, three words, the word before the last, column and the byte
above, character classes), the weight set by how many models know their context, the two more
APMs of ``mix.sse``, each node's bit history (``mix.histories``) and ``mix.level`` 1, which
turns on a set of them in one field. Each is off by default, so files written before them keep
their bits."""

import dataclasses

import numpy as np
import pytest

from mambazip.errors import ConfigError
from mambazip.predictor import SMALL, ContextMixer, MixConfig
from mambazip.predictor.apm import apm_predict
from mambazip.predictor.config import (
    EXTRA_KINDS,
    EXTRA_SETS,
    LEVEL1_CONTEXTS,
    LEVEL2_DEAD_ZONE,
    LEVEL2_SETS,
    LEVEL3_CONTEXTS,
)
from mambazip.predictor.context import (
    HISTORY_STATES,
    RUNS,
    _make_slot,
    history_map_init,
    history_next,
    slot_key,
)
from mambazip.predictor.counters import SQUASH
from mambazip.predictor.history import (
    IND_SIZE,
    KIND_CODES,
    M1,
    MAX_COLUMN,
    _above,
    char_class,
    context_hashes,
    history_push,
)
from mambazip.predictor.loop import (
    MATCH_APM,
    N_APMS,
    N_FINAL_ROWS,
    N_ROWS,
    ROW_C2,
    ROW_FOUND,
    V_AIDX,
    V_APM1,
    V_APM2,
    V_APMS,
    V_FOUND,
    V_HIDX,
    V_P12,
    V_SEL,
    V_SF,
    V_WF,
    allocate,
    decayed_lr,
    layout,
    n_inputs,
    view,
)
from mambazip.predictor.match import match_context

MASK64 = (1 << 64) - 1
SIZES = layout(SMALL)  # of the history's arrays
EVERYTHING = dataclasses.replace(
    SMALL, contexts=EXTRA_KINDS, found_sel=True, sse=True, histories=True, c2_sel=True,
    final_sel=1, lr_decay=True, sets=EXTRA_SETS, counter_rates=1, apm_mean=1, dead_zone=9,
    last_byte=True, runs=True,
)  # fmt: skip


def _history(text, hist_log=8):
    hist = np.zeros(1 << hist_log, np.uint8)
    hstate = np.zeros(SIZES["hstate"], np.int64)
    words = np.zeros(SIZES["words"], np.uint64)
    for byte in text:
        history_push(hist, hstate, words, (1 << hist_log) - 1, byte)
    return hist, hstate, words


def _word_hash(word):
    """The word hash, derived independently: h = (h + lower(c) + 1) * M1 mod 2^64."""
    h = 0
    for c in word.lower():
        h = ((h + c + 1) * int(M1)) & MASK64
    return h


def _contexts(text, kinds, hist_log=8):
    """(the context hashes after text, the indirect table), computed after each byte as the
    loop does."""
    mask = (1 << hist_log) - 1
    hist = np.zeros(1 << hist_log, np.uint8)
    hstate = np.zeros(SIZES["hstate"], np.int64)
    words = np.zeros(SIZES["words"], np.uint64)
    codes = np.array([KIND_CODES[k] for k in kinds], np.int64)
    ctxh = np.zeros(len(kinds), np.uint64)
    orders = np.zeros(SIZES["orders"], np.uint64)
    ind = np.zeros(IND_SIZE, np.uint16)
    context_hashes(ctxh, orders, hist, hstate, words, codes, mask, ind)
    for byte in text:
        history_push(hist, hstate, words, mask, byte)
        context_hashes(ctxh, orders, hist, hstate, words, codes, mask, ind)
    return [int(h) for h in ctxh], ind


def _hashes(text, kinds, hist_log=8):
    return _contexts(text, kinds, hist_log)[0]


def test_character_classes_by_hand():
    expected = {"a": 0, "z": 0, "A": 1, "Z": 1, "0": 2, "9": 2, " ": 3, "\t": 3, "\n": 4,
                ".": 5, "<": 5, "~": 5, "\x00": 6, "\x7f": 6, "\xe9": 7}  # fmt: skip
    for char, cls in expected.items():
        assert char_class(ord(char)) == cls, char


def _nest(text):
    """The nesting state after text, derived independently: a stack count per bracket kind
    (opens past 15 and closes at 0 ignored), the tag and quote flags."""
    counts, tag, quote = {"(": 0, "[": 0, "{": 0}, 0, 0
    for ch in text.decode("latin-1"):
        if ch in "([{":
            counts[ch] = min(counts[ch] + 1, 15)
        elif ch in ")]}":
            opener = "([{"[")]}".index(ch)]
            counts[opener] = max(counts[opener] - 1, 0)
        elif ch in "<>":
            tag = ch == "<"
        elif ch == '"':
            quote ^= 1
        elif ch == "\n":
            quote = 0
    return counts["("] | counts["["] << 4 | counts["{"] << 8 | tag << 12 | quote << 13


@pytest.mark.parametrize(
    "text",
    [
        b"f(a[1], {b: (2)})",
        b"((([x",
        b")]}(",
        b'<a href="x">y',
        b'say "hi\nthere"',
        b"(" * 20,
        b"[[a]] {{b|c}} <ref>(d</ref>",
    ],
)
def test_the_nesting_state_counts_open_brackets_and_knows_tags_and_quotes(text):
    _, _, words = _history(text)
    assert int(words[3]) == _nest(text)


def test_the_nest_context_matches_where_the_nesting_and_the_last_byte_match():
    kinds = ("nest",)
    assert _hashes(b"f(x, g[y", kinds) == _hashes(b"[(z)](q, [y", kinds)  # ( [ open, then y
    assert _hashes(b"f(x, g[y", kinds) != _hashes(b"f(x, g(y", kinds)
    assert _hashes(b"f(x, g[y", kinds) != _hashes(b"f(x, g[z", kinds)


def test_the_three_last_words_are_kept_in_order():
    _, _, words = _history(b"One two, THREE four")
    assert [int(w) for w in words[:3]] == [
        _word_hash(b"four"),
        _word_hash(b"three"),
        _word_hash(b"two"),
    ]


def test_lines_start_after_each_newline():
    _, hstate, _ = _history(b"ab\ncdef\ngh")
    assert hstate.tolist() == [10, 8, 3]


@pytest.mark.parametrize(
    ("text", "column", "above"),
    [
        (b"abc\nxy", 2, ord("c")),  # under the c
        (b"abc\nxyz", 3, ord("\n")),  # the newline ending the line above
        (b"abc\nwxyz", 4, 0),  # past the end of the line above
        (b"abc\n", 0, ord("a")),
        (b"abc", 3, 0),  # no line above
        (b"a\n\nxy", 2, 0),  # the line above is empty
    ],
)
def test_column_and_the_byte_above(text, column, above):
    hist, hstate, _ = _history(text)
    assert tuple(int(v) for v in _above(hist, hstate, 255)) == (column, above)


def test_column_is_capped():
    hist, hstate, _ = _history(b"x" * 300)
    assert int(_above(hist, hstate, 1023)[0]) == MAX_COLUMN


def test_the_byte_above_is_0_once_it_has_left_the_ring():
    line = b"y" * 40 + b"\n"
    hist, hstate, _ = _history(line + b"z" * 30 + b"\n" + b"w" * 5, hist_log=6)
    assert int(_above(hist, hstate, 63)[1]) == ord("z")  # 31 bytes back: still in 64
    hist, hstate, _ = _history(b"z" * 70 + b"\n" + b"w" * 5, hist_log=6)
    assert int(_above(hist, hstate, 63)[1]) == 0  # 71 bytes back: overwritten


def test_column_contexts_match_where_column_and_byte_above_match():
    kinds = ("column", "above")
    a = _hashes(b"ab\ncd\nax", kinds)  # column 2, under the newline of "cd"
    b = _hashes(b"zz\ncd\nqx", kinds)  # the same, after other lines
    c = _hashes(b"ab\ncd\nay", kinds)  # another last byte: column agrees, above-and-b1 not
    assert a[0] == b[0] and a[1] == b[1]
    assert a[0] == c[0] and a[1] != c[1]


def test_the_word_before_the_last_skips_the_last():
    kinds = ("wordgap", "word3")
    a = _hashes(b"red big car", kinds)
    b = _hashes(b"red old car", kinds)
    assert a[0] == b[0]  # "car" after "red", whatever came between
    assert a[1] != b[1]


def test_the_word1b_context_is_the_last_whole_word_and_the_last_two_bytes():
    kinds = ("word1b",)
    a = _hashes(b"red car, bl", kinds)
    assert a == _hashes(b"big Car, bl", kinds)  # the word before it and the case do not count
    assert a == _hashes(b"car; bl", kinds)  # nor the bytes beyond the last two
    assert a != _hashes(b"red cat, bl", kinds)  # another last whole word
    assert a != _hashes(b"red car, bx", kinds)  # another last byte


def test_classes_context_sees_the_shape_of_the_last_8_bytes_and_the_last_byte():
    kinds = ("classes",)
    assert _hashes(b"Ab 12.cd", kinds) == _hashes(b"Xy 90,ed", kinds)
    assert _hashes(b"Ab 12.cd", kinds) != _hashes(b"Ab 12.ce", kinds)  # another last byte
    assert _hashes(b"Ab 12.cd", kinds) != _hashes(b"ab 12.cd", kinds)  # another class


def test_order_7_and_8_contexts_see_7_and_8_bytes():
    kinds = ("o7", "o8")
    a = _hashes(b"X1234567", kinds)
    b = _hashes(b"Y1234567", kinds)
    assert a[0] == b[0] and a[1] != b[1]


def test_the_indirect_table_keeps_the_two_bytes_that_followed_each_byte_and_pair():
    _, ind = _contexts(b"abcabd", ("indirect1",))
    a, b, c, d = (ord(ch) for ch in "abcd")
    assert int(ind[a]) == (b << 8) | b
    assert int(ind[b]) == (c << 8) | d
    assert int(ind[256 + ((a << 8) | b)]) == (c << 8) | d
    assert int(ind[256 + ((b << 8) | c)]) == a
    assert int(ind[d]) == 0  # nothing has followed d yet


def test_indirect_contexts_match_where_the_last_bytes_and_what_followed_them_match():
    kinds = ("indirect1", "indirect2")
    a = _hashes(b"ab.ab", kinds)
    b = _hashes(b"xab.ab", kinds)  # the same after another start
    c = _hashes(b"ab!ab", kinds)  # "b" and "ab" were followed by another byte
    d = _hashes(b"ab.xb", kinds)  # "b" as before, but "xb" never followed by anything
    assert a == b
    assert a[0] != c[0] and a[1] != c[1]
    assert a[0] == d[0] and a[1] != d[1]


def test_every_context_kind_has_its_own_code():
    assert len(set(KIND_CODES.values())) == len(KIND_CODES)
    assert set(EXTRA_KINDS) <= set(KIND_CODES)


def test_the_codes_of_the_first_kinds_are_those_files_were_written_with():
    first = {**{f"o{k}": k for k in range(7)}, "word": 7, "word2": 8, "skip1": 9, "skip3": 10}
    assert {k: KIND_CODES[k] for k in first} == first


def test_new_fields_are_left_out_of_the_settings_at_their_defaults():
    later = {"contexts", "found_sel", "sse", "histories", "level", "c2_sel", "final_sel",
             "lr_decay", "sets", "counter_rates", "apm_mean", "dead_zone", "promote",
             "last_byte", "runs"}  # fmt: skip
    assert set(SMALL.to_dict()).isdisjoint(later)
    assert MixConfig.from_dict(SMALL.to_dict()) == SMALL
    data = EVERYTHING.to_dict()
    assert data["contexts"] == list(EXTRA_KINDS)  # JSON's form
    assert MixConfig.from_dict(data) == EVERYTHING


@pytest.mark.parametrize(
    "contexts",
    [["o9"], ["column", "column"], "column", [1], ["word"], [*EXTRA_KINDS, "o7"]],
)
def test_contexts_must_be_distinct_extra_kinds(contexts):
    with pytest.raises(ConfigError):
        MixConfig.from_dict({**SMALL.to_dict(), "contexts": contexts})


def test_found_set_is_chosen_by_how_many_models_know_their_context():
    cfg = dataclasses.replace(SMALL, found_sel=True)
    mixer = ContextMixer(cfg)
    mixer.prime()
    sel = view(mixer.buffers, mixer.offs, V_SEL).reshape(256, -1)
    assert sel[1, 3] == ROW_FOUND + 0  # nothing seen yet, depth 0
    assert sel[5, 3] == ROW_FOUND + 2  # node 0b101: depth 2
    mixer.advance(np.frombuffer(b"abcabcabc", np.uint8))
    # After "abcabcabc" the orders 0-6 and the sparse contexts have seen the next byte's
    # context before; the two word contexts have not (the word "abcabcabc" is new).
    found = int(view(mixer.buffers, mixer.offs, V_FOUND)[0])
    assert found == len(cfg.context_kinds) - 2 == 9
    assert sel[1, 3] == ROW_FOUND + 8 * found


def test_sse_apms_are_the_order_3_hash_and_the_match_state():
    cfg = dataclasses.replace(SMALL, sse=True)
    mixer = ContextMixer(cfg)
    mixer.prime()
    aidx = view(mixer.buffers, mixer.offs, V_AIDX).reshape(256, N_APMS)
    sf = view(mixer.buffers, mixer.offs, V_SF)
    u = int(sf[1]) + 2048
    bucket = (u >> 7) + ((u & 127) >> 6)
    # No match at the start: the match APM's context is the node alone, after the 2^apm_log
    # order-3 contexts.
    assert aidx[1, 5] == ((1 << cfg.apm_log) + 1) * 33 + bucket
    assert aidx[1, 4] % 33 == bucket and aidx[1, 4] // 33 < 1 << cfg.apm_log
    assert layout(cfg)["apms"] == ((1 << cfg.apm_log) + MATCH_APM) * 33


@pytest.mark.parametrize("apm_mean", [0, 1])
def test_the_probability_coded_is_the_mean_of_the_apms_with_or_without_the_combiners(apm_mean):
    cfg = dataclasses.replace(SMALL, sse=True, apm_mean=apm_mean)
    mixer = ContextMixer(cfg)
    mixer.prime()
    mixer.advance(np.frombuffer(b"abcabcabdabc", np.uint8))
    b, offs = mixer.buffers, mixer.offs
    aidx = view(b, offs, V_AIDX).reshape(256, N_APMS)
    s = int(view(b, offs, V_SF)[1])
    tables = {0: V_APM1, 1: V_APM2, 4: V_APMS, 5: V_APMS}
    # The nearer bucket recorded for the update lies in the context's own 33 buckets.
    a = [int(apm_predict(view(b, offs, v), int(aidx[1, k]) // 33, s)[0]) for k, v in tables.items()]
    combined = int(SQUASH[s + 2047])
    want = (sum(a) + 2) // 4 if apm_mean else (2 * combined + sum(a) + 3) // 6
    assert view(b, offs, V_P12)[1] == want
    assert len(set(a)) > 1  # the APMs have learnt apart: the mean is not any one of them


def test_memory_bytes_counts_the_new_tables():
    buffers, _ = allocate(EVERYTHING)
    assert EVERYTHING.memory_bytes() == sum(b.nbytes for b in buffers.values())
    assert EVERYTHING.memory_bytes() > SMALL.memory_bytes()


@pytest.mark.parametrize("nibbles", [False, True])
def test_decoder_steps_equal_advance_with_every_text_part(nibbles):
    decoder_follows(EVERYTHING, nibbles)


def coded_tables(cfg, data):
    """The nibble tables a fresh mixer of cfg codes data (uint8) with."""
    mixer = ContextMixer(cfg, nibbles=True)
    mixer.prime()
    return mixer.advance(data)[0]


def decoder_follows(cfg, nibbles):
    """A decoder stepping byte by byte (and nibble by nibble) gives the tables of advance."""
    text = b"<p>The cat sat.\n    The dog sat.\n</p>\n" * 12 + bytes(range(256))
    data = np.frombuffer(text, np.uint8)
    enc, dec = ContextMixer(cfg, nibbles=nibbles), ContextMixer(cfg, nibbles=nibbles)
    enc.prime()
    dec.prime()
    freqs, p = enc.advance(data)
    for i, byte in enumerate(data):
        assert np.array_equal(dec.freq, freqs[i, : dec.freq.shape[0]]), i
        if nibbles:
            dec.advance_nibble(byte >> 4)
            assert np.array_equal(dec.freq_low, freqs[i, 16:]), i
        dec.advance_byte(byte)
    assert np.array_equal(dec.freq, enc.freq)
    assert -np.log2(p).sum() / data.size < 3.0  # it learns the repeats


def test_a_bit_history_keeps_a_leading_1_and_the_last_6_bits():
    h = 0
    seen = []
    for bit in (1, 0, 1, 1, 0, 0, 1, 1):
        h = history_next(h, bit)
        seen.append(int(h))
    assert seen == [0b11, 0b110, 0b1101, 0b11011, 0b110110, 0b1101100, 0b1011001, 0b1110011]
    assert max(seen) < HISTORY_STATES


def test_history_maps_start_at_the_share_of_ones_they_hold():
    hmaps = np.zeros(2 * HISTORY_STATES, np.int32)
    history_map_init(hmaps)
    p12 = hmaps >> 19
    assert p12[0] == 2048  # nothing seen
    assert p12[0b101] == 2048  # bits 0, 1: (1 + 1/2) / 3
    assert p12[0b111] == 4096 * 5 // 6  # bits 1, 1: (2 + 1/2) / 3
    assert p12[0b1000000] == 4096 // 14  # six 0s: (0 + 1/2) / 7
    assert p12[HISTORY_STATES + 0b111] == p12[0b111]  # every model's map alike


def test_each_context_keys_its_history_map_by_the_byte_it_saw_last():
    mixer = ContextMixer(dataclasses.replace(SMALL, histories=True, last_byte=True))
    mixer.prime()
    mixer.advance(np.frombuffer(b"aba", np.uint8))  # o1's context "a" was followed by "b"
    hidx = view(mixer.buffers, mixer.offs, V_HIDX).reshape(256, -1)
    o0, o1, b = 0, 1, ord("b")  # b = 0110 0010
    assert hidx[0, o0] == ord("a") and hidx[0, o1] == b  # the last byte of each context
    # Map index (3 model + way) * 128 + history: way 1 + the bit b takes after the node on
    # b's path, 0 off it. o1's slot saw one byte: histories 0b10 at node 1, 0b11 at node 2.
    assert hidx[1, o1] == (3 * o1 + 1) * HISTORY_STATES + 0b10
    assert hidx[2, o1] == (3 * o1 + 2) * HISTORY_STATES + 0b11
    assert hidx[3, o1] == (3 * o1 + 0) * HISTORY_STATES + 0  # off the path, never seen
    assert layout(mixer.cfg)["hmaps"] == 3 * len(mixer.cfg.context_kinds) * HISTORY_STATES


def test_with_runs_each_context_keys_its_history_map_by_its_last_byte_s_run_too():
    mixer = ContextMixer(dataclasses.replace(SMALL, histories=True, last_byte=True, runs=True))
    mixer.prime()
    # o1's context "a" is followed by "b", "b", "b", "c", then "c": the run of c is 1.
    mixer.advance(np.frombuffer(b"abababacaca", np.uint8))
    hidx = view(mixer.buffers, mixer.offs, V_HIDX).reshape(256, -1)
    o1, c = 1, ord("c")  # c = 0110 0011
    assert hidx[0, o1] == c | 1 << 8
    # Map index ((3 model + way) * RUNS + RUN_BUCKET[run]) * 128 + history. o1's node 1 saw
    # the first bits of b, b, b, c, c: all 0.
    assert hidx[1, o1] == ((3 * o1 + 1) * RUNS + 1) * HISTORY_STATES + 0b100000
    mixer.advance(np.frombuffer(b"cacaca", np.uint8))  # c three more times: run 4
    assert hidx[0, o1] == c | 4 << 8
    # Node 2 saw the second bits of b, b, b and five c: eight 1s, of which it keeps six.
    assert hidx[2, o1] == ((3 * o1 + 2) * RUNS + 3) * HISTORY_STATES + 0b1111111
    n_models = len(mixer.cfg.context_kinds)
    assert layout(mixer.cfg)["hmaps"] == 3 * RUNS * n_models * HISTORY_STATES
    assert layout(mixer.cfg)["runs"] == 1 << mixer.cfg.ctx_log


def test_a_context_never_seen_has_no_last_byte():
    mixer = ContextMixer(dataclasses.replace(SMALL, histories=True, last_byte=True))
    mixer.prime()
    mixer.advance(np.frombuffer(b"abc", np.uint8))
    hidx = view(mixer.buffers, mixer.offs, V_HIDX).reshape(256, -1)
    assert hidx[0, 1] == -1 and hidx[1, 1] == 3 * HISTORY_STATES


def test_a_fresh_slot_clears_the_bit_histories_it_replaces():
    tbl = np.zeros((8, 16), np.uint16)
    hst = np.full((8, 16), 7, np.uint8)
    key = slot_key(np.uint64(12345), -1)
    for s, n in enumerate((5, 2, 9, 4)):  # bucket 0: four slots in use, slot 1 the least used
        tbl[s, 0], tbl[s, 1] = 100 + s, (2048 << 4) | n
    s = _make_slot(tbl, key & np.uint64(~(np.uint64(1) << np.uint64(32))), 1, hst, True)
    assert s == 1 and tbl[1, 1] == 0
    assert hst[1].tolist() == [0] * 16
    assert (hst[[0, 2, 3]] == 7).all()
    again = _make_slot(tbl, key & np.uint64(~(np.uint64(1) << np.uint64(32))), 1, hst, True)
    assert again == 1  # found, not replaced


def _assert_codes_alike(a_cfg, b_cfg):
    """Both configs give the same tables on a text and allocate the same."""
    data = np.frombuffer(b"level one, level two\n" * 40, np.uint8)
    a, b = ContextMixer(a_cfg, nibbles=True), ContextMixer(b_cfg, nibbles=True)
    a.prime()
    b.prime()
    assert np.array_equal(a.advance(data)[0], b.advance(data)[0])
    assert a_cfg.memory_bytes() == b_cfg.memory_bytes()


def test_level_1_is_its_contexts_and_every_part_of_this_file():
    level = dataclasses.replace(SMALL, level=1)
    fields = dataclasses.replace(
        SMALL,
        contexts=LEVEL1_CONTEXTS,
        found_sel=True,
        sse=True,
        histories=True,
        c2_sel=True,
        final_sel=1,
        lr_decay=True,
    )
    assert level.context_kinds == fields.context_kinds
    _assert_codes_alike(level, fields)


def test_level_2_is_level_1_with_its_sets_counter_rates_apm_mean_and_dead_zone():
    level = dataclasses.replace(SMALL, level=2)
    fields = dataclasses.replace(
        SMALL,
        level=1,
        sets=LEVEL2_SETS,
        counter_rates=1,
        apm_mean=1,
        dead_zone=LEVEL2_DEAD_ZONE,
        last_byte=True,
    )
    assert level.context_kinds == fields.context_kinds
    assert level.weight_sets == fields.weight_sets == LEVEL2_SETS
    _assert_codes_alike(level, fields)


def test_level_3_is_level_2_with_the_nest_context_and_the_runs():
    level = dataclasses.replace(SMALL, level=3)
    fields = dataclasses.replace(SMALL, level=2, contexts=LEVEL3_CONTEXTS, runs=True)
    assert level.context_kinds == fields.context_kinds
    assert level.weight_sets == fields.weight_sets
    _assert_codes_alike(level, fields)


def test_level_3_with_the_nest_context_again_is_refused():
    with pytest.raises(ConfigError, match="repeats nest"):
        MixConfig.from_dict({**SMALL.to_dict(), "level": 3, "contexts": ["nest"]})


def test_level_2_with_a_weight_set_it_already_has_is_refused():
    with pytest.raises(ConfigError, match="repeats wordlen"):
        MixConfig.from_dict({**SMALL.to_dict(), "level": 2, "sets": ["column", "wordlen"]})
    assert MixConfig.from_dict({**SMALL.to_dict(), "level": 2, "sets": ["column"]}).level == 2


def test_level_1_with_a_context_it_already_has_is_refused():
    with pytest.raises(ConfigError, match="repeats column"):
        MixConfig.from_dict({**SMALL.to_dict(), "level": 1, "contexts": ["o8", "column"]})
    assert MixConfig.from_dict({**SMALL.to_dict(), "level": 1, "contexts": ["o8"]}).level == 1


def test_the_c2_set_is_chosen_by_the_byte_two_back():
    mixer = ContextMixer(dataclasses.replace(SMALL, c2_sel=True))
    mixer.prime()
    mixer.advance(np.frombuffer(b"xyz", np.uint8))
    sel = view(mixer.buffers, mixer.offs, V_SEL).reshape(256, -1)
    assert sel[1, 3] == ROW_C2 + ord("y") and sel[6, 3] == ROW_C2 + ord("y")


def test_extra_sets_are_chosen_by_their_context_and_the_depth_in_the_order_given():
    cfg = dataclasses.replace(SMALL, sets=("column", "classes", "wordlen", "c1depth"))
    mixer = ContextMixer(cfg)
    mixer.prime()
    mixer.advance(np.frombuffer(b"ab\nx7Ab", np.uint8))  # 'b' lower (0) after 'A' upper (1)
    sel = view(mixer.buffers, mixer.offs, V_SEL).reshape(256, -1)
    # Rows: column's 32 x 8 first, then classes' 64 x 8, wordlen's 16 x 8, c1depth's 256 x 8.
    starts = [N_ROWS, N_ROWS + 256, N_ROWS + 256 + 512, N_ROWS + 256 + 512 + 128]
    values = [4, 0 * 8 + 1, 2, ord("b")]  # column 4, classes (b, A), "Ab" 2 letters, c1
    for depth, node in ((0, 1), (2, 6)):  # node 0b110: depth 2
        assert sel[node, 3:7].tolist() == [
            s + 8 * v + depth for s, v in zip(starts, values, strict=True)
        ]
    assert layout(cfg)["w"] == (N_ROWS + 8 * (32 + 64 + 16 + 256)) * n_inputs(cfg)


def test_the_c3_and_hibits_sets_are_chosen_by_the_last_three_bytes():
    cfg = dataclasses.replace(SMALL, sets=("c3", "hibits"))
    mixer = ContextMixer(cfg)
    mixer.prime()
    mixer.advance(np.frombuffer(b"q\xe1A7", np.uint8))  # c3 0xe1, c2 'A' 0x41, c1 '7' 0x37
    sel = view(mixer.buffers, mixer.offs, V_SEL).reshape(256, -1)
    # hibits: c1's top 3 bits (0b001), c2's (0b010) above them, c3's top 2 (0b11) above those.
    hibits = 0b001 | 0b010 << 3 | 0b11 << 6
    for depth, node in ((0, 1), (3, 9)):
        assert sel[node, 3:5].tolist() == [N_ROWS + 8 * 0xE1 + depth,
                                            N_ROWS + 8 * 256 + 8 * hibits + depth]  # fmt: skip
    assert layout(cfg)["w"] == (N_ROWS + 8 * (256 + 256)) * n_inputs(cfg)


def test_the_word_set_is_chosen_by_the_word_so_far_and_is_one_row_outside_a_word():
    cfg = dataclasses.replace(SMALL, sets=("word",))

    def word_row(text):
        mixer = ContextMixer(cfg)
        mixer.prime()
        mixer.advance(np.frombuffer(text, np.uint8))
        return view(mixer.buffers, mixer.offs, V_SEL).reshape(256, -1)[1, 3]

    # The same word so far after different bytes: one row; its case does not count.
    assert word_row(b"a cat. cat") == word_row(b"the dog, Cat")
    assert word_row(b"a cat. cat") != word_row(b"a cat. cap")
    # Outside a word (the last byte not a letter), every history has value 0's row.
    assert word_row(b"a cat. ") == word_row(b"42 (") == N_ROWS
    assert layout(cfg)["w"] == (N_ROWS + 8 * 256) * n_inputs(cfg)


def test_the_pos4_set_is_chosen_by_the_position_mod_4_and_the_last_bytes_top_bits():
    cfg = dataclasses.replace(SMALL, sets=("c3", "pos4"))
    mixer = ContextMixer(cfg)
    mixer.prime()
    mixer.advance(np.frombuffer(b"\x00\x01\x02\x03\x04\xfe", np.uint8))  # 6 bytes: 6 % 4 = 2
    sel = view(mixer.buffers, mixer.offs, V_SEL).reshape(256, -1)
    pos4 = 2 * 64 + (0xFE >> 2)
    for depth, node in ((0, 1), (5, 40)):
        assert sel[node, 4] == N_ROWS + 8 * 256 + 8 * pos4 + depth


def test_the_column_and_wordlen_sets_share_their_last_row_past_it():
    cfg = dataclasses.replace(SMALL, sets=("column", "wordlen"))
    mixer = ContextMixer(cfg)
    mixer.prime()
    mixer.advance(np.frombuffer(b"a" * 40, np.uint8))
    sel = view(mixer.buffers, mixer.offs, V_SEL).reshape(256, -1)
    assert sel[1, 3:5].tolist() == [N_ROWS + 8 * 31, N_ROWS + 256 + 8 * 15]


def test_the_final_combiner_by_node_learns_only_the_rows_of_the_nodes_taken():
    mixer = ContextMixer(dataclasses.replace(SMALL, final_sel=1))
    mixer.prime()
    mixer.advance(np.frombuffer(b"A", np.uint8))  # the first byte's inputs are all 0
    wf = view(mixer.buffers, mixer.offs, V_WF).reshape(N_FINAL_ROWS, -1)
    before = wf.copy()
    mixer.advance(np.frombuffer(b"A", np.uint8))  # 0100 0001
    changed = sorted(np.flatnonzero((wf != before).any(axis=1)).tolist())
    assert changed == [1, 2, 5, 10, 20, 40, 80, 160]  # the prefixes 1, 10, 101, ... of 1 0100 0001


def test_the_matched_context_is_the_expected_byte_and_the_length_bucket():
    kinds = np.array([KIND_CODES["matched"]], np.int64)
    ctxh = np.zeros(1, np.uint64)

    def hashed(length, expected):
        match_context(ctxh, kinds, np.array([0, length, expected], np.int64), 0)
        return int(ctxh[0])

    assert hashed(0, 65) == hashed(0, 66)  # no match: one context
    assert hashed(3, 65) != hashed(3, 66) and hashed(3, 65) != hashed(4, 65)
    assert hashed(15, 65) == hashed(20, 65)  # buckets past 15 share one
    assert hashed(3, 65) >> 56 == KIND_CODES["matched"] + 1


def test_level_1_combiner_rate_starts_at_three_times_and_decays_to_combiner_lr():
    assert [decayed_lr(4, t) for t in (0, 1 << 16, 3 << 16, 1 << 40)] == [12, 8, 6, 4]
    assert decayed_lr(8, 1000) == 23  # 8 + floor(2^20 / 66,536) = 8 + 15
