"""Matrix-vector products with one fixed summation order.

Weights are stored input-major, ``Wt`` of shape (n_in, n_out), the transpose of PyTorch's
``Linear.weight``. Every product below is a chain of correctly rounded float32 ``*`` and ``+``
(never fused into FMA, never reassociated), in the order written here, on every CPU.

Forward, ``matvec``: axpy form. Output ``o`` is summed bias first, then inputs ``c`` in
ascending order. Four input rows are folded into one pass over ``y``, still in that order.
The contiguous inner loop vectorises across outputs without reassociation.

Backward, ``matvec_t_acc``: ``dx[c] += sum_o Wt[c, o] dy[o]`` is a reduction along a contiguous
row. Its order (the "16-lane order", defined by ``dot_lanes``):

- lane ``j`` (0..15) starts at +0.0 and adds ``Wt[c, o] * dy[o]`` for ``o = j, j+16, j+32, ...``
  in increasing ``o``; when ``n_out % 16 = t``, the last partial block feeds lanes ``0..t-1``;
- the 16 lanes are combined by halving: ``l[j] += l[j+8]`` (j < 8), ``l[j] += l[j+4]``
  (j < 4), ``l[j] += l[j+2]`` (j < 2), ``l[0] += l[1]``;
- then ``dx[c] += l[0]``.

The fast path emits this order as explicit ``<16 x float>`` LLVM vector IR
(``_make_lane_dots``). A fixed-width vector type is legalised on any target by splitting it
into whole registers (4 x SSE, 2 x AVX, 1 x AVX-512, 4 x NEON) without changing what any lane
computes, so the result does not depend on the SIMD width. The IR carries no fast-math flags.

Batched forms, each element with the same operations in the same order: ``matvec_rows``
(``matvec`` of several inputs, the weights read once), ``matvec_t_rows`` (``matvec_t_acc``
of several tokens, the weights read once) and ``outer_acc_rows`` (the weight gradient of
several tokens, newest first, row blocks held in registers across them).
"""

import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from ..jit import jit, kernel
from .simd import float_ptr, lanes_below, masked_load, masked_store, splat, vector_at

f32 = np.float32

LANES = 16  # part of the numeric format: changing it changes dx bits
ROWS = 4  # rows per vector call in matvec_t_acc and matvec_t_rows: speed only, every row is
# summed alike
TOKENS = 4  # tokens per vector call in matvec_t_rows: speed only, likewise


@kernel
def matvec(y, Wt, x, bias):
    """y (n_out,) = bias (n_out,) + x (n_in,) @ Wt (n_in, n_out).

    y[o] = ((bias[o] + Wt[0, o] x[0]) + Wt[1, o] x[1]) + ...; the four-row blocks only save
    loads and stores of y, the parenthesisation is the same as one row at a time."""
    n_in, n_out = Wt.shape
    for o in range(n_out):
        y[o] = bias[o]
    c = 0
    while c + 4 <= n_in:
        x0, x1, x2, x3 = x[c], x[c + 1], x[c + 2], x[c + 3]
        r0, r1, r2, r3 = Wt[c], Wt[c + 1], Wt[c + 2], Wt[c + 3]
        for o in range(n_out):
            y[o] = (((y[o] + r0[o] * x0) + r1[o] * x1) + r2[o] * x2) + r3[o] * x3
        c += 4
    while c < n_in:
        xc = x[c]
        row = Wt[c]
        for o in range(n_out):
            y[o] += row[o] * xc
        c += 1


@kernel
def matvec_rows(Y, Wt, X, bias):
    """Y[t] = matvec of X[t] for every row t of X (T, n_in) into Y (T, n_out), each row with
    exactly the operations of ``matvec``. The four weight rows of a block are used for all T
    inputs while they are in cache, so the matrix is read once, not T times."""
    T = X.shape[0]
    n_in, n_out = Wt.shape
    for t in range(T):
        y = Y[t]
        for o in range(n_out):
            y[o] = bias[o]
    c = 0
    while c + 4 <= n_in:
        r0, r1, r2, r3 = Wt[c], Wt[c + 1], Wt[c + 2], Wt[c + 3]
        for t in range(T):
            x0, x1, x2, x3 = X[t, c], X[t, c + 1], X[t, c + 2], X[t, c + 3]
            y = Y[t]
            for o in range(n_out):
                y[o] = (((y[o] + r0[o] * x0) + r1[o] * x1) + r2[o] * x2) + r3[o] * x3
        c += 4
    while c < n_in:
        row = Wt[c]
        for t in range(T):
            xc = X[t, c]
            y = Y[t]
            for o in range(n_out):
                y[o] += row[o] * xc
        c += 1


@jit
def dot_lanes(a, b):
    """sum_i a[i] * b[i] (n,) in the 16-lane order, as plain scalar code.

    The definition of the order used by ``matvec_t_acc``; its fallback for strided inputs."""
    lanes = np.zeros(LANES, np.float32)
    for i in range(a.shape[0]):
        lanes[i % LANES] += a[i] * b[i]
    width = LANES
    while width > 1:
        width //= 2
        for j in range(width):
            lanes[j] += lanes[j + width]
    return lanes[0]


def _make_lane_dots(rows, tokens):
    """Intrinsic ``(Wt, dY, c, t0) -> rows * tokens float32``: the 16-lane dot products of
    Wt[c + r] with dY[t0 + k], at position r * tokens + k. dY is (T, n_out), or (n_out,) for
    ``tokens = 1`` (t0 is then ignored).

    Needs unit inner strides of Wt and dY and dY.shape[-1] == Wt.shape[1] (not checked here).
    Each loaded block of a row serves all the tokens, each block of a token all the rows, and
    every product is its own add chain; each dot product's arithmetic is exactly that of
    ``rows = tokens = 1``."""

    @intrinsic
    def lane_dots(typingctx, Wt, dY, c, t0):
        ok = (
            isinstance(Wt, types.Array)
            and Wt.ndim == 2
            and Wt.dtype == types.float32
            and isinstance(dY, types.Array)
            and (dY.ndim == 2 or (dY.ndim == 1 and tokens == 1))
            and dY.dtype == types.float32
            and isinstance(c, types.Integer)
            and isinstance(t0, types.Integer)
        )
        if not ok:
            return None
        count = rows * tokens
        ret = types.float32 if count == 1 else types.UniTuple(types.float32, count)
        sig = ret(Wt, dY, c, t0)

        def codegen(context, builder, signature, args):
            intp = context.get_value_type(types.intp)
            i32 = ir.IntType(32)
            fl = ir.FloatType()
            vec = ir.VectorType(fl, LANES)
            zero = ir.Constant(vec, [0.0] * LANES)
            W_arr = context.make_array(signature.args[0])(context, builder, args[0])
            dY_ty = signature.args[1]
            dY_arr = context.make_array(dY_ty)(context, builder, args[1])
            c0 = context.cast(builder, args[2], signature.args[2], types.intp)
            first = context.cast(builder, args[3], signature.args[3], types.intp)

            n = builder.extract_value(W_arr.shape, 1)
            row_ptr = [
                float_ptr(context, builder, W_arr, (builder.add(c0, intp(r)), intp(0)))
                for r in range(rows)
            ]
            if dY_ty.ndim == 1:
                dy_ptr = [float_ptr(context, builder, dY_arr, (intp(0),))]
            else:
                dy_ptr = [
                    float_ptr(context, builder, dY_arr, (builder.add(first, intp(k)), intp(0)))
                    for k in range(tokens)
                ]
            pairs = [(r, k) for r in range(rows) for k in range(tokens)]

            def load_vec(ptr, i):  # ptr[i : i + LANES], unaligned
                return builder.load(vector_at(builder, ptr, i, LANES), align=4)

            # Whole blocks: acc = acc + a * b, lane-wise (two roundings, no FMA).
            acc = [cgutils.alloca_once_value(builder, zero) for _ in pairs]
            n_blocks = builder.udiv(n, intp(LANES))
            with cgutils.for_range(builder, n_blocks) as loop:
                i = builder.mul(loop.index, intp(LANES))
                a = [load_vec(ptr, i) for ptr in row_ptr]
                b = [load_vec(ptr, i) for ptr in dy_ptr]
                for slot, (r, k) in zip(acc, pairs, strict=True):
                    builder.store(builder.fadd(builder.load(slot), builder.fmul(a[r], b[k])), slot)

            # Partial block of t = n % LANES: masked loads read lanes j < t and give 0.0 on
            # the others (nothing past the end of the arrays is touched); acc + a * b is
            # formed on all lanes and kept on lanes j < t only.
            start = builder.mul(n_blocks, intp(LANES))
            in_tail = lanes_below(builder, builder.sub(n, start), LANES)

            def load_tail(ptr):  # ptr[start + j] for j < t, else 0.0
                return masked_load(builder, vector_at(builder, ptr, start, LANES), in_tail)

            a = [load_tail(ptr) for ptr in row_ptr]
            b = [load_tail(ptr) for ptr in dy_ptr]

            sums = []
            for slot, (r, k) in zip(acc, pairs, strict=True):
                lanes = builder.load(slot)
                with_tail = builder.fadd(lanes, builder.fmul(a[r], b[k]))
                lanes = builder.select(in_tail, with_tail, lanes)
                # Halving tree: l[j] + l[j + width/2] for j < width/2.
                width = LANES
                while width > 1:
                    width //= 2
                    half = ir.VectorType(i32, width)
                    lo = builder.shuffle_vector(lanes, lanes, ir.Constant(half, list(range(width))))
                    hi = builder.shuffle_vector(
                        lanes, lanes, ir.Constant(half, list(range(width, 2 * width)))
                    )
                    lanes = builder.fadd(lo, hi)
                sums.append(builder.extract_element(lanes, i32(0)))
            if count == 1:
                return sums[0]
            return context.make_tuple(builder, signature.return_type, sums)

        return sig, codegen

    return lane_dots


_lane_dots_1 = _make_lane_dots(1, 1)
_lane_dots_rows = _make_lane_dots(ROWS, 1)
_lane_dots_tokens = _make_lane_dots(1, TOKENS)
_lane_dots_block = _make_lane_dots(ROWS, TOKENS)


@kernel
def matvec_t_acc(dx, Wt, dy):
    """dx (n_in,) += Wt (n_in, n_out) @ dy (n_out,): the input gradient of ``matvec``.

    Each dx[c] += its row's dot product in the 16-lane order (see module docstring)."""
    n_in, n_out = Wt.shape
    if dy.shape[0] != n_out or dx.shape[0] != n_in:
        raise ValueError("matvec_t_acc: shapes do not match")
    if (n_out > 1 and Wt.strides[1] != 4) or dy.strides[0] != 4:
        for c in range(n_in):  # strided views: same order, scalar code
            dx[c] += dot_lanes(Wt[c], dy)
        return
    c = 0
    while c + ROWS <= n_in:
        s = _lane_dots_rows(Wt, dy, c, 0)
        for r in range(ROWS):
            dx[c + r] += s[r]
        c += ROWS
    while c < n_in:
        dx[c] += _lane_dots_1(Wt, dy, c, 0)
        c += 1


@kernel
def matvec_t_rows(dX, Wt, dY):
    """dX[t] (n_in,) += Wt (n_in, n_out) @ dY[t] (n_out,) for every row t of dY (T, n_out):
    ``matvec_t_acc`` of T tokens, each dot product in the same 16-lane order. A block of
    ROWS rows of Wt serves TOKENS tokens at a time, so the matrix is read once, not T times,
    and the products of one loaded block feed ROWS * TOKENS independent chains."""
    T, n_out = dY.shape
    n_in = Wt.shape[0]
    if Wt.shape[1] != n_out or dX.shape[0] != T or dX.shape[1] != n_in:
        raise ValueError("matvec_t_rows: shapes do not match")
    if (n_out > 1 and Wt.strides[1] != 4) or (n_out > 1 and dY.strides[1] != 4):
        for t in range(T):
            matvec_t_acc(dX[t], Wt, dY[t])
        return
    c = 0
    while c + ROWS <= n_in:
        t = 0
        while t + TOKENS <= T:
            s = _lane_dots_block(Wt, dY, c, t)
            for r in range(ROWS):
                for k in range(TOKENS):
                    dX[t + k, c + r] += s[r * TOKENS + k]
            t += TOKENS
        while t < T:
            s = _lane_dots_rows(Wt, dY[t], c, 0)
            for r in range(ROWS):
                dX[t, c + r] += s[r]
            t += 1
        c += ROWS
    while c < n_in:
        t = 0
        while t + TOKENS <= T:
            s = _lane_dots_tokens(Wt, dY, c, t)
            for k in range(TOKENS):
                dX[t + k, c] += s[k]
            t += TOKENS
        while t < T:
            dX[t, c] += _lane_dots_1(Wt, dY[t], c, 0)
            t += 1
        c += 1


BLOCK = 4  # vectors of LANES outputs held in registers across the tokens: speed only


def _make_outer_acc(rows):
    """Intrinsic ``(dWt, X, dY, c)``: dWt[c + r] += X[t, c + r] * dY[t] for r < ``rows`` and
    t = n-1, ..., 0 (n = X.shape[0]), as one chain of ``+=`` per element, with BLOCK * LANES
    outputs of each row held in registers across all n tokens: each element is loaded and
    stored once instead of once per token, and each loaded block of dY[t] serves all the rows.

    Needs unit inner strides of dWt and dY, dY.shape[1] == dWt.shape[1] (not checked)."""

    @intrinsic
    def outer_acc(typingctx, dWt, X, dY, c):
        ok = all(
            isinstance(a, types.Array) and a.ndim == 2 and a.dtype == types.float32
            for a in (dWt, X, dY)
        ) and isinstance(c, types.Integer)
        if not ok:
            return None
        sig = types.none(dWt, X, dY, c)

        def codegen(context, builder, signature, args):
            intp = context.get_value_type(types.intp)
            W_arr, X_arr, dY_arr = (
                context.make_array(signature.args[k])(context, builder, args[k]) for k in range(3)
            )
            c0 = context.cast(builder, args[3], signature.args[3], types.intp)

            def element(arr, i, j):
                return float_ptr(context, builder, arr, (i, j))

            n = builder.extract_value(X_arr.shape, 0)
            n_out = builder.extract_value(W_arr.shape, 1)
            row_ptr = [element(W_arr, builder.add(c0, intp(r)), intp(0)) for r in range(rows)]

            def vec_at(ptr, i):
                return vector_at(builder, ptr, i, LANES)

            def block(start, n_vec, load, store):
                """Outputs start .. start + n_vec * LANES of each row: load, all tokens, store."""
                offsets = [builder.add(start, intp(k * LANES)) for k in range(n_vec)]
                slots = [
                    [cgutils.alloca_once_value(builder, load(vec_at(ptr, i))) for i in offsets]
                    for ptr in row_ptr
                ]
                with cgutils.for_range(builder, n) as loop:
                    t = builder.sub(builder.sub(n, intp(1)), loop.index)
                    dy = element(dY_arr, t, intp(0))
                    d = [load(vec_at(dy, i)) for i in offsets]
                    for r in range(rows):
                        x = builder.load(element(X_arr, t, builder.add(c0, intp(r))))
                        xs = splat(builder, x, LANES)
                        for k in range(n_vec):
                            total = builder.fadd(builder.load(slots[r][k]), builder.fmul(xs, d[k]))
                            builder.store(total, slots[r][k])
                for r in range(rows):
                    for k in range(n_vec):
                        store(builder.load(slots[r][k]), vec_at(row_ptr[r], offsets[k]))

            def load_full(ptr):
                return builder.load(ptr, align=4)

            def store_full(value, ptr):
                builder.store(value, ptr, align=4)

            width = BLOCK * LANES
            n_blocks = builder.udiv(n_out, intp(width))
            with cgutils.for_range(builder, n_blocks) as loop:
                block(builder.mul(loop.index, intp(width)), BLOCK, load_full, store_full)

            # The last n_out % width outputs: LANES at a time, masked to those below n_out.
            rest = builder.mul(n_blocks, intp(width))
            n_tail = builder.udiv(
                builder.add(builder.sub(n_out, rest), intp(LANES - 1)), intp(LANES)
            )
            with cgutils.for_range(builder, n_tail) as loop:
                start = builder.add(rest, builder.mul(loop.index, intp(LANES)))
                mask = lanes_below(builder, builder.sub(n_out, start), LANES)
                block(
                    start,
                    1,
                    lambda ptr: masked_load(builder, ptr, mask),
                    lambda value, ptr: masked_store(builder, value, ptr, mask),
                )
            return context.get_dummy_value()

        return sig, codegen

    return outer_acc


OUTER_ROWS = 2  # rows of dWt per call of _outer_acc_block: speed only
_outer_acc_row = _make_outer_acc(1)
_outer_acc_block = _make_outer_acc(OUTER_ROWS)


@kernel
def outer_acc_rows(dWt, X, dY, tied, emb_dx, inputs):
    """dWt (n_in, n_out) += Σ_t outer(X[t], dY[t]) over the n rows of X (n, n_in) and
    dY (n, n_out), newest (t = n-1) first: each element gets one chain of ``+=``,
    dWt[c, o] += X[t, c] * dY[t, o] for t = n-1, ..., 0, the order of one token at a time,
    while each row of dWt stays in cache for all n tokens instead of one pass per token.
    With ``tied`` (dWt is also the embedding's gradient) token t's term is followed by
    dWt[:, inputs[t]] += emb_dx[t] (n, n_in).

    Without ``tied``, blocks of rows stay in registers for all n tokens (``_make_outer_acc``).
    With it, one token per pass over a row: folding four tokens into one expression, as
    ``matvec`` does, ran four times slower here (measured, 2026-11-29)."""
    n = X.shape[0]
    n_in, n_out = dWt.shape
    unit = (n_out < 2 or (dWt.strides[1] == 4 and dY.strides[1] == 4)) and dY.shape[1] == n_out
    if not tied and unit:
        c = 0
        while c + OUTER_ROWS <= n_in:
            _outer_acc_block(dWt, X, dY, c)
            c += OUTER_ROWS
        while c < n_in:
            _outer_acc_row(dWt, X, dY, c)
            c += 1
        return
    for c in range(n_in):
        row = dWt[c]
        for t in range(n - 1, -1, -1):
            xc = X[t, c]
            d = dY[t]
            for o in range(n_out):
                row[o] += xc * d[o]
            if tied:
                row[inputs[t]] += emb_dx[t, c]
