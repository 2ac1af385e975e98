"""Deterministic float32 transcendentals built from +, -, *, /, sqrt and bit operations.

The decoder must reproduce every probability bit for bit on any CPU, so nothing on the coding
path may call libm or SVML, whose results differ between platforms and versions. Each function
here is a fixed sequence of IEEE-754 float32 operations; LLVM may vectorise the loops that call
them (lane-wise ops give the same bits) but may not reassociate or fuse them, because no
fastmath flag is ever set.

Accuracy (checked against float64 NumPy in tests/test_detmath.py): exp and log within 2 ulp
over their normal range; softplus, sigmoid and silu within a few ulp.
"""

import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from ..jit import kernel, kernel_inline

f32 = np.float32

LOG2E = f32(1.4426950408889634)
# ln 2 split in two: LN2_HI has few enough significant bits that k * LN2_HI is exact for |k| < 256.
LN2_HI = f32(0.693359375)
LN2_LO = f32(-2.1219444005469057e-4)
EXP_MAX = f32(88.0)  # exp(88) < FLT_MAX and 88 * log2(e) rounds to 127, the largest normal exponent
EXP_MIN = f32(-87.0)  # rounds to 2^-126 at worst, the smallest normal: no subnormal scaling needed
SQRT2 = f32(1.4142135623730951)


@intrinsic
def _int32_as_float32(typingctx, bits):
    sig = types.float32(types.int32)

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.FloatType())

    return sig, codegen


@intrinsic
def _float32_as_int32(typingctx, value):
    sig = types.int32(types.float32)

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(32))

    return sig, codegen


@kernel_inline
def exp32(x):
    """e^x in float32: x = k ln2 + r with |r| <= ln2/2, e^r by its degree-7 Taylor polynomial
    (truncation error r^8/8! < 6e-9, below float32 resolution), times 2^k built from bits.

    Written without early returns and with k kept in float32 so that loops over it vectorise
    (the out-of-range results are selected at the end); it gives the bits of the earlier
    form with branches and an integer floor for every one of the 2^32 inputs (checked once,
    exhaustively, 2026-11-29)."""
    x = f32(x)
    xc = x
    if xc > EXP_MAX:
        xc = EXP_MAX
    if xc < EXP_MIN:
        xc = EXP_MIN
    kf = np.floor(xc * LOG2E + f32(0.5))
    r = (xc - kf * LN2_HI) - kf * LN2_LO
    p = f32(1.0 / 5040.0)
    p = p * r + f32(1.0 / 720.0)
    p = p * r + f32(1.0 / 120.0)
    p = p * r + f32(1.0 / 24.0)
    p = p * r + f32(1.0 / 6.0)
    p = p * r + f32(0.5)
    p = p * r + f32(1.0)
    p = p * r + f32(1.0)
    result = p * _int32_as_float32((np.int32(kf) + np.int32(127)) << np.int32(23))
    if x > EXP_MAX:
        result = f32(np.inf)
    if x < EXP_MIN:
        result = f32(0.0)
    return result


@kernel_inline
def _atanh_series_x2(s):
    """2 * atanh(s) = log((1 + s) / (1 - s)) for |s| <= 1/3, by its odd Taylor series to s^13
    (remainder < 6e-9 at s = 1/3)."""
    s2 = s * s
    p = f32(1.0 / 13.0)
    p = p * s2 + f32(1.0 / 11.0)
    p = p * s2 + f32(1.0 / 9.0)
    p = p * s2 + f32(1.0 / 7.0)
    p = p * s2 + f32(1.0 / 5.0)
    p = p * s2 + f32(1.0 / 3.0)
    p = p * s2 + f32(1.0)
    return f32(2.0) * s * p


@kernel_inline
def log32(x):
    """Natural log of a positive normal float32: x = m 2^e with m in [sqrt(1/2), sqrt(2)),
    log m = 2 atanh((m - 1) / (m + 1)). Returns -inf for 0 and nan for negatives."""
    x = f32(x)
    if x <= f32(0.0):
        return f32(-np.inf) if x == f32(0.0) else f32(np.nan)
    if x == f32(np.inf):
        return x
    bits = _float32_as_int32(x)
    e = ((bits >> 23) & 0xFF) - 127
    m = _int32_as_float32(np.int32((bits & 0x7FFFFF) | 0x3F800000))
    if m > SQRT2:
        m = m * f32(0.5)
        e += 1
    s = (m - f32(1.0)) / (m + f32(1.0))
    ef = f32(e)
    return ef * LN2_HI + (_atanh_series_x2(s) + ef * LN2_LO)


@kernel_inline
def log1p_unit32(u):
    """log(1 + u) for u in [0, 1], accurate also for tiny u (no cancellation)."""
    u = f32(u)
    return _atanh_series_x2(u / (f32(2.0) + u))


@kernel_inline
def softplus32(x):
    """log(1 + e^x) = max(x, 0) + log(1 + e^-|x|): no overflow, no cancellation."""
    x = f32(x)
    ax = x if x >= f32(0.0) else -x
    pos = x if x > f32(0.0) else f32(0.0)
    return pos + log1p_unit32(exp32(-ax))


@kernel_inline
def sigmoid32(x):
    x = f32(x)
    return f32(1.0) / (f32(1.0) + exp32(-x))


@kernel_inline
def silu32(x):
    x = f32(x)
    return x * sigmoid32(x)


@kernel
def softmax32(probs, logits):
    """probs (V,) = softmax(logits (V,)); max, exponentials and their sum in index order."""
    V = logits.shape[0]
    mx = logits[0]
    for v in range(1, V):
        if logits[v] > mx:
            mx = logits[v]
    # Exponentials and their in-order sum in separate loops: the first vectorises.
    for v in range(V):
        probs[v] = exp32(logits[v] - mx)
    total = f32(0.0)
    for v in range(V):
        total += probs[v]
    inv_total = f32(1.0) / total
    for v in range(V):
        probs[v] = probs[v] * inv_total


@kernel
def apply_exp32(out, x):
    for i in range(x.size):
        out.flat[i] = exp32(x.flat[i])


@kernel
def apply_log32(out, x):
    for i in range(x.size):
        out.flat[i] = log32(x.flat[i])


@kernel
def apply_softplus32(out, x):
    for i in range(x.size):
        out.flat[i] = softplus32(x.flat[i])


@kernel
def apply_sigmoid32(out, x):
    for i in range(x.size):
        out.flat[i] = sigmoid32(x.flat[i])


@kernel
def apply_silu32(out, x):
    for i in range(x.size):
        out.flat[i] = silu32(x.flat[i])


def exp_vector(builder, x):
    """``exp32`` of every lane of the float vector ``x``, emitted as LLVM IR (for the kernels
    written as vector IR): exp32's operations in exp32's order, lane by lane, so every lane
    has exp32's bits (tests/test_detmath.py checks every 64th float)."""
    vec = x.type
    lanes = vec.count
    ints = ir.VectorType(ir.IntType(32), lanes)

    def const(value):
        return ir.Constant(vec, [float(f32(value))] * lanes)

    def above(a, bound):
        return builder.fcmp_ordered(">", a, const(bound))

    def below(a, bound):
        return builder.fcmp_ordered("<", a, const(bound))

    xc = builder.select(above(x, EXP_MAX), const(EXP_MAX), x)
    xc = builder.select(below(xc, EXP_MIN), const(EXP_MIN), xc)
    floor = cgutils.get_or_insert_function(
        builder.module, ir.FunctionType(vec, [vec]), f"llvm.floor.v{lanes}f32"
    )
    kf = builder.call(floor, [builder.fadd(builder.fmul(xc, const(LOG2E)), const(0.5))])
    r = builder.fsub(
        builder.fsub(xc, builder.fmul(kf, const(LN2_HI))), builder.fmul(kf, const(LN2_LO))
    )
    p = const(1.0 / 5040.0)
    for c in (1.0 / 720.0, 1.0 / 120.0, 1.0 / 24.0, 1.0 / 6.0, 0.5, 1.0, 1.0):
        p = builder.fadd(builder.fmul(p, r), const(c))
    k = builder.add(builder.fptosi(kf, ints), ir.Constant(ints, [127] * lanes))
    scale = builder.bitcast(builder.shl(k, ir.Constant(ints, [23] * lanes)), vec)
    result = builder.fmul(p, scale)
    result = builder.select(above(x, EXP_MAX), const(np.inf), result)
    return builder.select(below(x, EXP_MIN), const(0.0), result)
