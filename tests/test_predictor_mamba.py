"""The Mamba's extra forms in the mix: its own combiner step, its initial weight, the weight set
chosen by its confidence, the APM keyed by its expected byte or its quantised node probability,
and the decoder's one-call step."""

import dataclasses

import numpy as np
import pytest

from mambazip.coder import Decoder, Encoder
from mambazip.errors import ConfigError
from mambazip.predictor import SMALL, ContextMixer, MixConfig
from mambazip.predictor.byte_pdf import CONFIDENCE, mamba_context, node_sums
from mambazip.predictor.combiner import W_ONE, train
from mambazip.predictor.counters import STRETCH
from mambazip.predictor.history import KIND_CODES
from mambazip.predictor.loop import (
    N_APMS,
    N_ROWS,
    R_SETS,
    ROW_MAMBA,
    V_AIDX,
    V_CTXH,
    V_SEL,
    V_SF,
    V_SST,
    V_W,
    V_WF,
    V_X,
    n_inputs,
    view,
)

A = 0x41  # 0100 0001


def _mixer(**kw):
    cfg = dataclasses.replace(SMALL, mamba=True, **kw)
    mixer = ContextMixer(cfg)
    pdf = np.zeros(256, np.float32)
    pdf[A] = 1.0  # all mass on one byte: pm is 1 or 4095 on its path, 2048 (no mass) elsewhere
    mixer.prime(pdf)
    nin = n_inputs(cfg)
    mcol = len(cfg.context_kinds) + 2 * cfg.match
    return mixer, cfg, nin, mcol


def _view(mixer, v, cols):
    return view(mixer.buffers, mixer.offs, v).reshape(-1, cols)


def test_train_steps_the_mamba_columns_with_their_own_rate():
    w = np.full((1, 2), W_ONE, np.int32)
    x = np.zeros((2, 2), np.int32)
    x[1] = 256, 512
    # s = 0: squash(0) = 2048, bit 1: e = 2048. Column 0 at lr 2: (256 * 4096 + 2^13) >> 14 = 64;
    # column 1 at lr2 4: (512 * 8192 + 2^13) >> 14 = 256.
    train(w, 0, x, 1, 2, 0, 1, 2, 1, 2, 4, 0)
    assert w[0].tolist() == [W_ONE + 64, W_ONE + 256]


def test_mamba_inputs_start_at_their_own_weight():
    mixer, _, nin, mcol = _mixer(mamba_w0=40)
    w = _view(mixer, V_W, nin)
    assert w.shape[0] == N_ROWS
    assert np.all(w[:, mcol : mcol + 2] == W_ONE * 40 // 64)
    assert np.all(w[:, :mcol] == W_ONE // 4) and np.all(w[:, nin - 1] == 0)


def test_mamba_weight_set_by_agreement_and_confidence():
    mixer, _, nin, mcol = _mixer(mamba_sel=1)
    sel = _view(mixer, V_SEL, R_SETS)
    x = _view(mixer, V_X, nin)
    # Root: on the expected byte's path, its bit 0 (e = 1); pm = 1, |stretch| >= 1024 (bucket 3).
    assert x[1, mcol] == STRETCH[1] and abs(int(STRETCH[1])) >= 1024
    assert sel[1, 3] == ROW_MAMBA + 8 * (4 * 1 + 3) + 0
    # Node 0b10 (the second bit after a first 0): expected bit 1 (e = 2), pm = 4095, bucket 3.
    assert sel[2, 3] == ROW_MAMBA + 8 * (4 * 2 + 3) + 1
    # Node 0b11: off the path (e = 0), no mass: pm = 2048, stretch 0 (bucket 0), depth 1.
    assert x[3, mcol] == 0 and sel[3, 3] == ROW_MAMBA + 1
    # Without it: agreement x depth only.
    mixer, _, nin, mcol = _mixer()
    sel = _view(mixer, V_SEL, R_SETS)
    assert sel[1, 3] == ROW_MAMBA + 8 + 0 and sel[2, 3] == ROW_MAMBA + 16 + 1


@pytest.mark.parametrize("mode", [1, 2])
def test_apm_keyed_by_the_mamba(mode):
    mixer, _, nin, mcol = _mixer(mamba_eapm=mode)
    aidx = _view(mixer, V_AIDX, N_APMS)
    sf = view(mixer.buffers, mixer.offs, V_SF)
    x = _view(mixer, V_X, nin)
    for node in (1, 2):  # the root and node 0b10 are predicted in full (mode 1)
        ctx = (A << 8) | node if mode == 1 else (((int(x[node, mcol]) + 2048) >> 7) << 8) | node
        u = int(sf[node]) + 2048
        assert aidx[node, 3] == ctx * 33 + (u >> 7) + ((u & 127) >> 6)


def test_new_fields_default_to_the_old_bits_and_are_bounded():
    old = {k: v for k, v in SMALL.to_dict().items() if not k.startswith("mamba_")}
    assert MixConfig.from_dict(old) == SMALL  # a header written before them decodes the same
    for bad in ({"mamba_sel": 3}, {"mamba_eapm": 3}, {"mamba_eapm": True}, {"mamba_w0": 65}):
        with pytest.raises(ConfigError):
            MixConfig.from_dict({**SMALL.to_dict(), **bad})


def test_promoted_mamba_inputs_enter_the_final_combiner_after_the_sets_at_weight_0():
    mixer, _, nin, mcol = _mixer(promote=True)
    nsets = 4  # c0, match, c1, the Mamba's
    x = _view(mixer, V_X, nin)
    sst = _view(mixer, V_SST, R_SETS)
    wf = _view(mixer, V_WF, R_SETS)
    assert sst[1, nsets : nsets + 2].tolist() == x[1, mcol : mcol + 2].tolist()
    assert x[1, mcol] == STRETCH[1]  # node 1 on the path of A: the Mamba is sure of bit 0
    assert (wf[:, nsets : nsets + 2] == 0).all() and (wf[:, :nsets] == W_ONE // nsets).all()
    mixer.advance(np.array([A], np.uint8), np.zeros((1, 256), np.float32) + 1 / 256)
    assert (wf[:, nsets : nsets + 2] != 0).any()  # they learn


def test_promote_needs_the_mamba():
    assert not dataclasses.replace(SMALL, promote=True).promoted
    assert dataclasses.replace(SMALL, promote=True, mamba=True).promoted


def _assert_decoder_step_equals_advance(cfg, seed):
    """Byte by byte, the decoder's tables equal those advance computed for the whole input."""
    rng = np.random.default_rng(seed)
    data = rng.integers(0, 4, 600).astype(np.uint8) + 97
    pdfs = (rng.random((data.size + 1, 256)) ** 6).astype(np.float32)
    enc, dec = ContextMixer(cfg), ContextMixer(cfg)
    enc.prime(pdfs[0])
    dec.prime(pdfs[0])
    freqs, _ = enc.advance(data, pdfs[1:])
    for i, byte in enumerate(data):
        assert np.array_equal(dec.freq, freqs[i]), i
        dec.advance_byte(byte, pdfs[i + 1])
    assert np.array_equal(dec.freq, enc.freq)


def test_decoder_step_equals_advance_with_every_mamba_form():
    cfg = dataclasses.replace(
        SMALL, mamba=True, mamba_sel=1, mamba_eapm=1, mamba_lr=4, promote=True, level=2
    )
    _assert_decoder_step_equals_advance(cfg, 3)


def _mamba_hash(pdf, c1):
    kinds = np.array([KIND_CODES["o1"], KIND_CODES["mamba"]], np.int64)
    ctxh = np.array([7, 0], np.uint64)
    tree = np.zeros(512, np.float64)
    mamba_context(ctxh, kinds, tree, node_sums(tree, pdf), c1)
    assert ctxh[0] == 7  # other kinds are left as they are
    return int(ctxh[1])


def _sure_of(byte, q):
    """A pdf whose argmax is byte at probability q, the rest spread evenly."""
    pdf = np.full(256, (1.0 - q) / 255, np.float32)
    pdf[byte] = q
    return pdf


def test_the_mamba_context_is_its_expected_byte_its_confidence_and_the_last_byte():
    base = _mamba_hash(_sure_of(A, 0.6), 32)
    assert base >> 56 == KIND_CODES["mamba"] + 1
    assert _mamba_hash(_sure_of(A, 0.65), 32) == base  # the same bucket, 0.5 < q <= 0.7
    assert _mamba_hash(_sure_of(A + 1, 0.6), 32) != base
    assert _mamba_hash(_sure_of(A, 0.6), 33) != base
    buckets = {_mamba_hash(_sure_of(A, q), 32) for q in (0.1, 0.2, 0.4, 0.6, 0.8, 0.95)}
    assert len(buckets) == len(CONFIDENCE) + 1


def test_the_mixer_hashes_the_mamba_context_from_each_pdf_it_is_given():
    cfg = dataclasses.replace(SMALL, mamba=True, contexts=("mamba",))
    i = cfg.context_kinds.index("mamba")
    mixer = ContextMixer(cfg)
    mixer.prime(_sure_of(A, 0.6))
    ctxh = view(mixer.buffers, mixer.offs, V_CTXH)
    assert int(ctxh[i]) == _mamba_hash(_sure_of(A, 0.6), 0)  # nothing before the first byte
    mixer.advance_byte(A, _sure_of(A + 2, 0.95))
    assert int(ctxh[i]) == _mamba_hash(_sure_of(A + 2, 0.95), A)


def test_decoder_step_equals_advance_with_the_mamba_context():
    cfg = dataclasses.replace(SMALL, mamba=True, contexts=("mamba",), level=7)
    _assert_decoder_step_equals_advance(cfg, 5)


def test_bits_decode_with_the_mamba_context_under_the_tables_the_encoder_coded_with():
    cfg = dataclasses.replace(SMALL, mamba=True, contexts=("mamba",), level=7, bits=True)
    rng = np.random.default_rng(6)
    data = rng.integers(0, 4, 600).astype(np.uint8) + 97
    pdfs = (rng.random((data.size + 1, 256)) ** 6).astype(np.float32)
    enc = ContextMixer(cfg, nibbles=True)
    enc.prime(pdfs[0])
    freqs, _ = enc.advance(data, pdfs[1:])
    coder = Encoder()
    coder.encode(np.unpackbits(data), freqs.reshape(-1, 2))
    dec = ContextMixer(cfg, nibbles=True)
    dec.prime(pdfs[0])
    decoder = Decoder(coder.finish())
    for i, byte in enumerate(data):
        assert dec.decode_byte(decoder) == byte, i
        assert np.array_equal(dec.freq, freqs[i]), i
        dec.advance_byte(byte, pdfs[i + 1])
