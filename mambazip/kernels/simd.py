"""Helpers for the kernels written as LLVM vector IR (Numba intrinsics): ``linalg``'s and
``scan``'s. Why such IR gives the same bits on every CPU: see ``linalg``'s docstring.
"""

from llvmlite import ir
from numba import types
from numba.core import cgutils

I32 = ir.IntType(32)
F32 = ir.FloatType()


def splat(builder, value, lanes):
    """A vector of ``lanes`` copies of ``value``."""
    vec = ir.VectorType(value.type, lanes)
    first = builder.insert_element(ir.Constant(vec, ir.Undefined), value, I32(0))
    same = ir.Constant(ir.VectorType(I32, lanes), [0] * lanes)
    return builder.shuffle_vector(first, ir.Constant(vec, ir.Undefined), same)


def lanes_below(builder, count, lanes):
    """The mask of lanes j < ``count`` (an integer of the pointer width)."""
    indices = ir.Constant(ir.VectorType(count.type, lanes), list(range(lanes)))
    return builder.icmp_signed("<", indices, splat(builder, count, lanes))


def masked_load(builder, ptr, mask):
    """The float lanes at ``ptr`` (a vector pointer) where ``mask`` is set, 0.0 elsewhere;
    nothing is read for the others, so a partial vector at the end of an array is safe."""
    vec = ptr.type.pointee
    fn = cgutils.get_or_insert_function(
        builder.module,
        ir.FunctionType(vec, [vec.as_pointer(), I32, mask.type, vec]),
        f"llvm.masked.load.v{vec.count}f32.p0",
    )
    return builder.call(fn, [ptr, I32(4), mask, ir.Constant(vec, [0.0] * vec.count)])


def masked_store(builder, value, ptr, mask):
    """Store the lanes of ``value`` where ``mask`` is set."""
    vec = value.type
    fn = cgutils.get_or_insert_function(
        builder.module,
        ir.FunctionType(ir.VoidType(), [vec, vec.as_pointer(), I32, mask.type]),
        f"llvm.masked.store.v{vec.count}f32.p0",
    )
    builder.call(fn, [value, ptr, I32(4), mask])


def float_ptr(context, builder, arr, index):
    """Pointer to the float32 ``arr[index]`` (``arr`` a Numba array struct, ``index`` a tuple
    of pointer-width integers), by the array's byte strides."""
    offset = ir.Constant(context.get_value_type(types.intp), 0)
    for axis, i in enumerate(index):
        offset = builder.add(offset, builder.mul(i, builder.extract_value(arr.strides, axis)))
    base = builder.bitcast(arr.data, ir.IntType(8).as_pointer())
    return builder.bitcast(builder.gep(base, [offset]), F32.as_pointer())


def vector_at(builder, ptr, i, lanes):
    """``ptr[i : i + lanes]`` (ptr a float pointer) as a vector pointer."""
    return builder.bitcast(builder.gep(ptr, [i]), ir.VectorType(F32, lanes).as_pointer())


def transpose(builder, rows):
    """The square matrix of ``rows`` (a list of as many vectors as each has lanes), transposed:
    out[i][j] = rows[j][i]. Shuffles only, so the values keep every bit. Each stage swaps
    one bit between the row and the column index of every element (off-diagonal blocks of
    size 1, 2, 4, ...)."""
    lanes = len(rows)
    rows = list(rows)
    b = 1
    while b < lanes:
        swap_lo = [c if not c & b else lanes + (c ^ b) for c in range(lanes)]
        swap_hi = [c ^ b if not c & b else lanes + c for c in range(lanes)]
        for r in range(lanes):
            if r & b:
                continue
            a, c = rows[r], rows[r | b]
            rows[r] = builder.shuffle_vector(a, c, ir.Constant(ir.VectorType(I32, lanes), swap_lo))
            rows[r | b] = builder.shuffle_vector(
                a, c, ir.Constant(ir.VectorType(I32, lanes), swap_hi)
            )
        b *= 2
    return rows


def add_in_order(builder, acc, columns, count):
    """acc + columns[0] + columns[1] + ..., one rounded vector ``+`` at a time, left to right,
    over the first ``count`` columns (an integer of the pointer width)."""
    for i, column in enumerate(columns):
        keep = builder.icmp_signed(">", count, ir.Constant(count.type, i))
        acc = builder.select(keep, builder.fadd(acc, column), acc)
    return acc


def add_lanes_in_order(builder, total, vector, count, spill):
    """*total (a float pointer) += vector[0], then += vector[1], ..., one rounded ``+`` at a
    time, over the first min(count, lanes) lanes; ``spill`` is a vector alloca to read the
    lanes from."""
    lanes = vector.type.count
    builder.store(vector, spill)
    first = builder.bitcast(spill, F32.as_pointer())
    limit = ir.Constant(count.type, lanes)
    n = builder.select(builder.icmp_signed(">", count, limit), limit, count)
    with cgutils.for_range(builder, n) as lane:
        term = builder.load(builder.gep(first, [lane.index]))
        builder.store(builder.fadd(builder.load(total), term), total)
