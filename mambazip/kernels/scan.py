"""The selective scan's backward step, and the forward's state update, as one pass over the
channels in LLVM vector IR.

Written as plain Numba loops, the step needs nine passes over (E, N) arrays: a loop that
writes more than one array, or carries a sum, is not vectorised, because Numba cannot tell
LLVM that its arrays do not overlap. Here each channel e is done at once, its N states
LANES at a time in registers: the (E, N) arrays are read once and the two written once.

Every value is formed with the operations, and every sum in the order, documented in
``backward.ssm_backward``: the sums over e run e = 0, 1, ... and the sums over n run
n = 0, 1, ... from +0.0 (or from dy D for du), one rounded ``+`` at a time.
"""

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from .simd import F32, I32, float_ptr, lanes_below, masked_load, masked_store, splat, vector_at

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
        spill_ddt = cgutils.alloca_once(builder, ir.VectorType(F32, LANES))
        spill_du = cgutils.alloca_once(builder, ir.VectorType(F32, LANES))
        vec_zero = ir.Constant(ir.VectorType(F32, LANES), [0.0] * LANES)
        n_vectors = builder.udiv(builder.add(N, intp(LANES - 1)), intp(LANES))

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
            with cgutils.for_range(builder, E) as channel:
                e = channel.index
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

                # The ordered sums over n: a whole vector lane by lane from registers, a
                # partial one from a spill, only its lanes below N.
                sum_ddt, sum_du = at(ddt_, e), at(du_, e)
                with builder.if_else(builder.icmp_signed(">=", left, intp(LANES))) as (
                    whole,
                    partial,
                ):
                    with whole:
                        acc_ddt, acc_du = builder.load(sum_ddt), builder.load(sum_du)
                        for j in range(LANES):
                            acc_ddt = builder.fadd(acc_ddt, builder.extract_element(t_ddt, I32(j)))
                            acc_du = builder.fadd(acc_du, builder.extract_element(t_du, I32(j)))
                        builder.store(acc_ddt, sum_ddt)
                        builder.store(acc_du, sum_du)
                    with partial:
                        builder.store(t_ddt, spill_ddt)
                        builder.store(t_du, spill_du)
                        with cgutils.for_range(builder, left) as lane:
                            for spill, total in ((spill_ddt, sum_ddt), (spill_du, sum_du)):
                                first = builder.bitcast(spill, F32.as_pointer())
                                term = builder.load(builder.gep(first, [lane.index]))
                                builder.store(builder.fadd(builder.load(total), term), total)
            masked_store(builder, builder.load(sum_dB), lanes(dB_, n0), mask)
            masked_store(builder, builder.load(sum_dC), lanes(dC_, n0), mask)
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def scan_update_pass(typingctx, ssm, dA, ssm_prev, dt, u, B):
    """The state update of ``forward.ssm_forward``: for every channel e, ssm_prev[e] = ssm[e],
    then ssm[e, n] = dA[e, n] * ssm[e, n] + (dt[e] u[e]) B[n], with the
    operations of the plain loop. ssm, dA, ssm_prev (E, N) with contiguous rows; dt, u (E,);
    B (N,) contiguous (checked by the caller)."""
    arrays = (ssm, dA, ssm_prev, dt, u, B)
    if not all(isinstance(a, types.Array) and a.dtype == types.float32 for a in arrays):
        return None
    sig = types.none(*arrays)

    def codegen(context, builder, signature, args):
        intp = context.get_value_type(types.intp)
        ssm_, dA_, prev_, dt_, u_, B_ = (
            context.make_array(signature.args[k])(context, builder, args[k]) for k in range(6)
        )
        E = builder.extract_value(ssm_.shape, 0)
        N = builder.extract_value(ssm_.shape, 1)

        def lanes(arr, *index):
            return vector_at(builder, float_ptr(context, builder, arr, index), intp(0), LANES)

        n_vectors = builder.udiv(builder.add(N, intp(LANES - 1)), intp(LANES))
        with cgutils.for_range(builder, E) as channel:
            e = channel.index
            dt_e = builder.load(float_ptr(context, builder, dt_, (e,)))
            u_e = builder.load(float_ptr(context, builder, u_, (e,)))
            dtu_v = splat(builder, builder.fmul(dt_e, u_e), LANES)
            with cgutils.for_range(builder, n_vectors) as vector:
                n0 = builder.mul(vector.index, intp(LANES))
                mask = lanes_below(builder, builder.sub(N, n0), LANES)
                s_ptr = lanes(ssm_, e, n0)
                s_v = masked_load(builder, s_ptr, mask)
                masked_store(builder, s_v, lanes(prev_, e, n0), mask)
                dA_v = masked_load(builder, lanes(dA_, e, n0), mask)
                B_v = masked_load(builder, lanes(B_, n0), mask)
                s_v = builder.fadd(builder.fmul(dA_v, s_v), builder.fmul(dtu_v, B_v))
                masked_store(builder, s_v, s_ptr, mask)
        return context.get_dummy_value()

    return sig, codegen
