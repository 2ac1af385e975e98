"""Shaped views of a flat buffer, built without Numba's general reshape, and the copy of one
array into another, both without Numba's reference counting (NRT).

``arr[o : o + n].reshape(shape)`` calls a C helper for every reshape; the named views of the
parameters and of the activations are built several times per byte, and those calls cost
more than some of the layers. ``carve`` forms the C-contiguous view directly.

``dst[...] = src`` between arrays needs NRT (Numba allocates a temporary copy when the two
may overlap), which the kernels compile without (jit.py); ``copy_into`` moves the bytes with
memmove, which is correct for overlapping arrays too.
"""

from numba import types
from numba.core import cgutils
from numba.core.imputils import impl_ret_borrowed
from numba.extending import intrinsic
from numba.np.arrayobj import make_array, populate_array

from ..jit import jit_inline


@intrinsic
def _carve_unchecked(typingctx, flat, start, shape):
    """flat[start : start + prod(shape)] as a C-contiguous array of ``shape`` sharing flat's
    memory (and its reference count). The caller checks the bounds."""
    ok = (
        isinstance(flat, types.Array)
        and flat.ndim == 1
        and flat.layout == "C"
        and isinstance(start, types.Integer)
        and isinstance(shape, types.UniTuple)
        and isinstance(shape.dtype, types.Integer)
    )
    if not ok:
        return None
    nd = shape.count
    retty = types.Array(flat.dtype, nd, "C", readonly=not flat.mutable)
    sig = retty(flat, start, shape)

    def codegen(context, builder, signature, args):
        flat_ty, start_ty, shape_ty = signature.args
        src = make_array(flat_ty)(context, builder, args[0])
        out = make_array(retty)(context, builder)
        dims = [
            context.cast(builder, d, shape_ty.dtype, types.intp)
            for d in cgutils.unpack_tuple(builder, args[2], nd)
        ]
        itemsize = context.get_constant(
            types.intp, context.get_abi_sizeof(context.get_data_type(flat_ty.dtype))
        )
        strides = [itemsize] * nd
        for d in range(nd - 2, -1, -1):
            strides[d] = builder.mul(strides[d + 1], dims[d + 1])
        offset = context.cast(builder, args[1], start_ty, types.intp)
        populate_array(
            out,
            data=builder.gep(src.data, [offset]),
            shape=dims,
            strides=strides,
            itemsize=itemsize,
            meminfo=src.meminfo,
            parent=src.parent,
        )
        return impl_ret_borrowed(context, builder, retty, out._getvalue())

    return sig, codegen


@jit_inline
def carve(flat, start, shape):
    """The view flat[start : start + prod(shape)].reshape(shape) of a 1-D C-contiguous array."""
    size = 1
    for d in shape:
        size *= d
    if start < 0 or size < 0 or start + size > flat.shape[0]:
        raise IndexError("carve: view out of bounds")
    return _carve_unchecked(flat, start, shape)


@intrinsic
def _copy_unchecked(typingctx, dst, src):
    """Move src's elements into dst, C-contiguous arrays of one dtype and size (the caller
    checks the shapes)."""
    ok = (
        isinstance(dst, types.Array)
        and isinstance(src, types.Array)
        and dst.layout == "C"
        and src.layout == "C"
        and dst.dtype == src.dtype
        and dst.ndim == src.ndim
        and dst.mutable
    )
    if not ok:
        return None
    sig = types.void(dst, src)

    def codegen(context, builder, signature, args):
        dst_ary = make_array(signature.args[0])(context, builder, args[0])
        src_ary = make_array(signature.args[1])(context, builder, args[1])
        itemsize = context.get_abi_sizeof(context.get_data_type(signature.args[0].dtype))
        cgutils.raw_memmove(builder, dst_ary.data, src_ary.data, dst_ary.nitems, itemsize)
        return context.get_dummy_value()

    return sig, codegen


@jit_inline
def copy_into(dst, src):
    """dst[...] = src for C-contiguous arrays of the same shape and dtype."""
    if dst.shape != src.shape:
        raise ValueError("copy_into: shapes differ")
    _copy_unchecked(dst, src)
