"""The project's own float32 transcendentals: accuracy against float64 NumPy over the ranges
the model uses, and no libm anywhere on the coding path."""

import numpy as np
import pytest
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from mambazip.kernels import detmath

f32 = np.float32


def ulp_error(ours, exact):
    """|ours - exact| in units of the float32 spacing at exact."""
    spacing = np.spacing(np.abs(exact).astype(f32)).astype(np.float64)
    return np.abs(ours.astype(np.float64) - exact) / spacing


def test_exp_is_within_two_ulp_over_its_normal_range():
    x = np.linspace(-87.0, 88.0, 400_001, dtype=f32)
    out = np.empty_like(x)
    detmath.apply_exp32(out, x)
    assert ulp_error(out, np.exp(x.astype(np.float64))).max() <= 2.0


def test_exp_saturates_to_zero_and_infinity():
    x = np.array([-1000.0, -87.5, 88.5, 1000.0], dtype=f32)
    out = np.empty_like(x)
    detmath.apply_exp32(out, x)
    assert out.tolist() == [0.0, 0.0, np.inf, np.inf]


def _exp32_first_form(x):
    """exp32 as first released (early returns, integer floor), in float32 NumPy: files
    written with it must keep decoding, so the vectorisable form must give its bits."""
    x = f32(x)
    with np.errstate(over="ignore", invalid="ignore"):
        k = np.floor(x * detmath.LOG2E + f32(0.5))
        r = (x - k * detmath.LN2_HI) - k * detmath.LN2_LO
        p = f32(1.0 / 5040.0)
        for c in (1.0 / 720.0, 1.0 / 120.0, 1.0 / 24.0, 1.0 / 6.0, 0.5, 1.0, 1.0):
            p = p * r + f32(c)
        scale = ((np.clip(k, -200, 200).astype(np.int32) + 127) << 23).view(f32)
        out = p * scale
    out[x > detmath.EXP_MAX] = np.inf
    out[x < detmath.EXP_MIN] = 0.0
    return out


def test_exp_gives_the_bits_of_its_first_form_on_every_64th_float():
    bits = np.arange(0, 2**32, 64, dtype=np.uint64).astype(np.uint32)
    x = bits.view(f32)
    x = x[np.isfinite(x)]
    out = np.empty_like(x)
    detmath.apply_exp32(out, x)
    assert np.array_equal(out.view(np.uint32), _exp32_first_form(x).view(np.uint32))


def test_log_is_within_three_ulp_for_positive_normals():
    # Relative error of the atanh series and the ln2 split stays below 3 float32 ulp.
    x = np.exp(np.linspace(-87.0, 88.0, 400_001)).astype(f32)
    x = x[(x > 0) & np.isfinite(x)]
    out = np.empty_like(x)
    detmath.apply_log32(out, x)
    exact = np.log(x.astype(np.float64))
    near_one = np.abs(exact) < 1e-3  # ulp of a tiny result is tiny: judge those absolutely
    assert ulp_error(out[~near_one], exact[~near_one]).max() <= 3.0
    assert np.abs(out[near_one] - exact[near_one]).max() <= 1e-7


def test_log_of_zero_negative_and_infinity():
    x = np.array([0.0, -1.0, np.inf], dtype=f32)
    out = np.empty_like(x)
    detmath.apply_log32(out, x)
    assert out[0] == -np.inf and np.isnan(out[1]) and out[2] == np.inf


@pytest.mark.parametrize(
    ("kernel", "exact"),
    [
        (detmath.apply_softplus32, lambda x: np.logaddexp(0.0, x)),
        (detmath.apply_sigmoid32, lambda x: 1.0 / (1.0 + np.exp(-x))),
        (detmath.apply_silu32, lambda x: x / (1.0 + np.exp(-x))),
    ],
    ids=["softplus", "sigmoid", "silu"],
)
def test_activation_relative_error_is_below_4e_7(kernel, exact):
    # A few float32 roundings on top of exp: 4e-7 is about 3.5 ulp relative.
    x = np.linspace(-40.0, 40.0, 200_001, dtype=f32)
    out = np.empty_like(x)
    kernel(out, x)
    ref = exact(x.astype(np.float64))
    keep = np.abs(ref) > 1e-30
    assert (np.abs(out[keep] - ref[keep]) / np.abs(ref[keep])).max() < 4e-7


def test_softmax_sums_to_one_and_matches_float64():
    rng = np.random.default_rng(0)
    logits = (rng.standard_normal(256) * 8).astype(f32)
    probs = np.empty_like(logits)
    detmath.softmax32(probs, logits)
    ref = np.exp(logits.astype(np.float64) - logits.max())
    ref /= ref.sum()
    assert np.abs(probs - ref).max() < 1e-6
    assert abs(float(probs.astype(np.float64).sum()) - 1.0) < 1e-5


def test_softmax_survives_extreme_logits():
    logits = np.full(256, -1e30, dtype=f32)
    logits[7] = 1e30
    probs = np.empty_like(logits)
    detmath.softmax32(probs, logits)
    assert probs[7] == 1.0 and probs.sum() == 1.0


@intrinsic
def _apply_exp_vector(typingctx, out, x):
    """out[i:i+16] = detmath.exp_vector(x[i:i+16]) for contiguous float32 arrays whose length
    is a multiple of 16."""
    sig = types.none(out, x)

    def codegen(context, builder, signature, args):
        out_arr, x_arr = (context.make_array(t)(context, builder, a)
                          for t, a in zip(signature.args, args, strict=True))  # fmt: skip
        intp = context.get_value_type(types.intp)
        n = builder.udiv(builder.extract_value(x_arr.shape, 0), intp(16))
        vec = ir.VectorType(ir.FloatType(), 16).as_pointer()
        with cgutils.for_range(builder, n) as loop:
            i = builder.mul(loop.index, intp(16))
            src = builder.bitcast(builder.gep(x_arr.data, [i]), vec)
            dst = builder.bitcast(builder.gep(out_arr.data, [i]), vec)
            builder.store(detmath.exp_vector(builder, builder.load(src, align=4)), dst, align=4)
        return context.get_dummy_value()

    return sig, codegen


@njit
def _exp_vector_of(out, x):
    _apply_exp_vector(out, x)


def test_exp_in_vector_ir_gives_the_bits_of_exp32_on_every_64th_float():
    bits = np.arange(0, 2**32, 64, dtype=np.uint64).astype(np.uint32)
    x = bits.view(f32)  # every kind of float: infinities, NaNs, subnormals, zeros
    x = x[: x.shape[0] // 16 * 16]
    want, got = np.empty_like(x), np.empty_like(x)
    detmath.apply_exp32(want, x)
    _exp_vector_of(got, x)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
