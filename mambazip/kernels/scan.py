"""The selective scan's forward and backward steps, each one pass over the channels in LLVM
vector IR.

Written as plain Numba loops, the backward step needs nine passes over (E, N) arrays and
the forward three: a loop that writes more than one array, or carries a sum, is not
vectorised, because Numba cannot tell LLVM that its arrays do not overlap. Here the N
states of a channel are LANES at a time in registers, and every (E, N) array is read once
and written once. The ordered sums over n of LANES channels are formed together: their
terms are transposed in registers (``simd.transpose``), so that each channel's sum runs in
its own lane, one vector ``+`` per state; the last E % LANES channels sum lane by lane.

Every value is formed with the operations, and every sum in the order, documented in
``forward.ssm_forward`` and ``backward.ssm_backward``: the sums over e run e = 0, 1, ...
and the sums over n run n = 0, 1, ... from +0.0 (or from dy D for du), one rounded ``+``
at a time.
"""

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from .detmath import exp_vector
from .simd import (
    F32,
    I32,
    add_in_order,
    add_lanes_in_order,
    float_ptr,
    lanes_below,
    masked_load,
    masked_store,
    splat,
    transpose,
    vector_at,
)

LANES = 16  # states per vector: speed only, the order of every sum is fixed above


@intrinsic
def scan_backward_pass(typingctx, du, ddt, dB, dC, dA_log, dD, dssm, dy, u, dt, B, C, A, dA,
                       ssm_prev, D_skip, need, carry):  # fmt: skip
    """See ``backward.ssm_backward`` (the same arguments). Needs unit strides along N in
    B, C, dB, dC and in the rows of the (E, N) arrays (checked by ssm_backward)."""
    arrays = (du, ddt, dB, dC, dA_log, dD, dssm, dy, u, dt, B, C, A, dA, ssm_prev, D_skip)
    if not all(isinstance(a, types.Array) and a.dtype == types.float32 for a in arrays):
        return None
    if not (isinstance(need, types.Boolean) and isinstance(carry, types.Boolean)):
        return None
    sig = types.none(*arrays, need, carry)

    def codegen(context, builder, signature, args):
        intp = context.get_value_type(types.intp)
        (du_, ddt_, dB_, dC_, dA_log_, dD_, dssm_, dy_, u_, dt_, B_, C_, A_, dA_, prev_,
         D_skip_) = (context.make_array(signature.args[k])(context, builder, args[k])
                     for k in range(16))  # fmt: skip
        need_, carry_ = args[16], args[17]
        E = builder.extract_value(prev_.shape, 0)
        N = builder.extract_value(prev_.shape, 1)

        def at(arr, *index):
            return float_ptr(context, builder, arr, index)

        def lanes(arr, *index):
            return vector_at(builder, at(arr, *index), intp(0), LANES)

        zero = ir.Constant(F32, 0.0)
        # The sums over n of each channel start here and go on block by block in du and ddt.
        with cgutils.for_range(builder, E) as channel:
            e = channel.index
            dy_e, u_e = builder.load(at(dy_, e)), builder.load(at(u_, e))
            with builder.if_then(need_):
                p = at(dD_, e)
                builder.store(builder.fadd(builder.load(p), builder.fmul(dy_e, u_e)), p)
            builder.store(builder.fmul(dy_e, builder.load(at(D_skip_, e))), at(du_, e))
            builder.store(zero, at(ddt_, e))
        spill = cgutils.alloca_once(builder, ir.VectorType(F32, LANES))
        vec_zero = ir.Constant(ir.VectorType(F32, LANES), [0.0] * LANES)
        n_vectors = builder.udiv(builder.add(N, intp(LANES - 1)), intp(LANES))
        n_groups = builder.udiv(E, intp(LANES))

        # Blocks of LANES states outside, channels inside: the sums over e into dB and dC
        # stay in registers through all the channels instead of passing through memory.
        with cgutils.for_range(builder, n_vectors) as vector:
            n0 = builder.mul(vector.index, intp(LANES))
            left = builder.sub(N, n0)
            mask = lanes_below(builder, left, LANES)

            def load(ptr):
                return masked_load(builder, ptr, mask)

            def add_to(ptr, term):
                masked_store(builder, builder.fadd(load(ptr), term), ptr, mask)

            B_v, C_v = load(lanes(B_, n0)), load(lanes(C_, n0))
            sum_dB = cgutils.alloca_once_value(builder, vec_zero)
            sum_dC = cgutils.alloca_once_value(builder, vec_zero)

            def channel(e):
                """Channel e's terms: dC, dB and dA_log and dssm in place; returns the
                vectors of its ddt and du terms over this block's states."""
                dy_e = builder.load(at(dy_, e))
                u_e = builder.load(at(u_, e))
                dt_e = builder.load(at(dt_, e))
                dtu = builder.fmul(dt_e, u_e)
                dy_v, u_v, dt_v, dtu_v = (splat(builder, x, LANES) for x in (dy_e, u_e, dt_e, dtu))

                dA_v, prev_v, A_v = (load(lanes(a, e, n0)) for a in (dA_, prev_, A_))
                s_v = builder.fadd(builder.fmul(dA_v, prev_v), builder.fmul(dtu_v, B_v))
                builder.store(builder.fadd(builder.load(sum_dC), builder.fmul(dy_v, s_v)), sum_dC)
                g_slot = cgutils.alloca_once_value(builder, builder.fmul(dy_v, C_v))
                with builder.if_then(carry_):
                    p = lanes(dssm_, e, n0)
                    g_v = builder.fadd(builder.load(g_slot), load(p))
                    builder.store(g_v, g_slot)
                    masked_store(builder, builder.fmul(g_v, dA_v), p, mask)
                g_v = builder.load(g_slot)
                dq = builder.fmul(builder.fmul(g_v, prev_v), dA_v)
                t_ddt = builder.fadd(
                    builder.fmul(dq, A_v), builder.fmul(g_v, builder.fmul(u_v, B_v))
                )
                with builder.if_then(need_):
                    add_to(lanes(dA_log_, e, n0), builder.fmul(builder.fmul(dq, dt_v), A_v))
                builder.store(builder.fadd(builder.load(sum_dB), builder.fmul(g_v, dtu_v)), sum_dB)
                t_du = builder.fmul(g_v, builder.fmul(dt_v, B_v))
                return t_ddt, t_du

            # LANES channels at a time: their terms transposed, so that each channel's ordered
            # sum over n runs in its own lane, one vector + per state.
            with cgutils.for_range(builder, n_groups) as group:
                e0 = builder.mul(group.index, intp(LANES))
                channels = [builder.add(e0, intp(j)) for j in range(LANES)]
                terms = [channel(e) for e in channels]
                for k, out in ((0, ddt_), (1, du_)):
                    ptrs = [at(out, e) for e in channels]
                    acc = vec_zero
                    for j, ptr in enumerate(ptrs):
                        acc = builder.insert_element(acc, builder.load(ptr), I32(j))
                    columns = transpose(builder, [t[k] for t in terms])
                    acc = add_in_order(builder, acc, columns, left)
                    for j, ptr in enumerate(ptrs):
                        builder.store(builder.extract_element(acc, I32(j)), ptr)

            # The last E % LANES channels one by one, their sums over n lane by lane.
            done = builder.mul(n_groups, intp(LANES))
            with cgutils.for_range(builder, builder.sub(E, done)) as rest:
                e = builder.add(done, rest.index)
                t_ddt, t_du = channel(e)
                add_lanes_in_order(builder, at(ddt_, e), t_ddt, left, spill)
                add_lanes_in_order(builder, at(du_, e), t_du, left, spill)
            masked_store(builder, builder.load(sum_dB), lanes(dB_, n0), mask)
            masked_store(builder, builder.load(sum_dC), lanes(dC_, n0), mask)
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def scan_forward_pass(typingctx, y, ssm, dA, ssm_prev, u, dt, B, C, A, D_skip, save):
    """One step of ``forward.ssm_forward`` (the same arguments) in one pass over the
    channels: for each, its N states LANES at a time, dA = exp32(dt A) (``exp_vector``), the
    new state, and the terms of y. With ``save`` dA and the old state go to dA and ssm_prev;
    without, those two are not touched. Needs unit strides along N in B, C and in the rows
    of the (E, N) arrays (checked by the caller).

    y[e] sums s[e, n] C[n] over n in order from +0.0, then adds D_skip[e] u[e]. LANES
    channels at a time the terms are transposed, so that each channel's sum runs in its own
    lane, one vector ``+`` per state; the last E % LANES channels sum lane by lane."""
    arrays = (y, ssm, dA, ssm_prev, u, dt, B, C, A, D_skip)
    if not all(isinstance(a, types.Array) and a.dtype == types.float32 for a in arrays):
        return None
    if not isinstance(save, types.Boolean):
        return None
    sig = types.none(*arrays, save)

    def codegen(context, builder, signature, args):
        intp = context.get_value_type(types.intp)
        y_, ssm_, dA_, prev_, u_, dt_, B_, C_, A_, D_skip_ = (
            context.make_array(signature.args[k])(context, builder, args[k]) for k in range(10)
        )
        save_ = args[10]
        E = builder.extract_value(ssm_.shape, 0)
        N = builder.extract_value(ssm_.shape, 1)
        vec_zero = ir.Constant(ir.VectorType(F32, LANES), [0.0] * LANES)

        def at(arr, *index):
            return float_ptr(context, builder, arr, index)

        def lanes(arr, *index):
            return vector_at(builder, at(arr, *index), intp(0), LANES)

        n_vectors = builder.udiv(builder.add(N, intp(LANES - 1)), intp(LANES))

        def block_terms(e, n0, mask):
            """Channel e, states n0 ..: the state update; returns the vector of s C."""

            def load(ptr):
                return masked_load(builder, ptr, mask)

            dt_e = builder.load(at(dt_, e))
            dtu_v = splat(builder, builder.fmul(dt_e, builder.load(at(u_, e))), LANES)
            dA_v = exp_vector(
                builder, builder.fmul(splat(builder, dt_e, LANES), load(lanes(A_, e, n0)))
            )
            s_ptr = lanes(ssm_, e, n0)
            s_v = load(s_ptr)
            with builder.if_then(save_):
                masked_store(builder, dA_v, lanes(dA_, e, n0), mask)
                masked_store(builder, s_v, lanes(prev_, e, n0), mask)
            B_v = load(lanes(B_, n0))
            s_v = builder.fadd(builder.fmul(dA_v, s_v), builder.fmul(dtu_v, B_v))
            masked_store(builder, s_v, s_ptr, mask)
            return builder.fmul(s_v, load(lanes(C_, n0)))

        def skip_term(e):
            return builder.fmul(builder.load(at(D_skip_, e)), builder.load(at(u_, e)))

        n_groups = builder.udiv(E, intp(LANES))
        with cgutils.for_range(builder, n_groups) as group:
            e0 = builder.mul(group.index, intp(LANES))
            channels = [builder.add(e0, intp(j)) for j in range(LANES)]
            acc = cgutils.alloca_once_value(builder, vec_zero)
            with cgutils.for_range(builder, n_vectors) as vector:
                n0 = builder.mul(vector.index, intp(LANES))
                left = builder.sub(N, n0)
                mask = lanes_below(builder, left, LANES)
                columns = transpose(builder, [block_terms(e, n0, mask) for e in channels])
                builder.store(add_in_order(builder, builder.load(acc), columns, left), acc)
            sums = builder.load(acc)
            for j, e in enumerate(channels):
                total = builder.fadd(builder.extract_element(sums, I32(j)), skip_term(e))
                builder.store(total, at(y_, e))

        spill = cgutils.alloca_once(builder, ir.VectorType(F32, LANES))
        done = builder.mul(n_groups, intp(LANES))
        with cgutils.for_range(builder, builder.sub(E, done)) as rest:
            e = builder.add(done, rest.index)
            total = cgutils.alloca_once_value(builder, ir.Constant(F32, 0.0))
            with cgutils.for_range(builder, n_vectors) as vector:
                n0 = builder.mul(vector.index, intp(LANES))
                left = builder.sub(N, n0)
                terms = block_terms(e, n0, lanes_below(builder, left, LANES))
                add_lanes_in_order(builder, total, terms, left, spill)
            builder.store(builder.fadd(builder.load(total), skip_term(e)), at(y_, e))
        return context.get_dummy_value()

    return sig, codegen
