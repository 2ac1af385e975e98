"""The one compilation policy of every Numba kernel, the Mamba's and the predictor's.

Never fastmath (DESIGN.md: no reassociation, no contraction to FMA, no approximate
functions); ``error_model="numpy"`` so that integer code carries no division-by-zero
branches; ``cache=True`` so that a run after the first loads the compiled code; ``nogil``
so that an overlapped update (kernels/segment.py) runs on its thread while the coding
thread is in compiled code, not only when Python's switch interval passes the lock on.

Kernels compile without Numba's reference counting (NRT, ``_nrt=False``): with it, every
call from compiled code and every view (a row ``Wt[c]``, a named view of a flat buffer)
increments and decrements the count of its array with atomic operations. In the
predictor's per-node helpers that was two thirds of the run time, and in the Mamba's step
about a tenth (scripts/profile_predictor.py, 2026-12-06). A kernel allocates nothing and
returns no array to Python: the arrays it works on are allocated once in Python, and a view
of an array its caller holds needs no count of its own. ``copy_into`` (kernels/views.py)
stands in for ``dst[...] = src``, which allocates when the two may overlap.

``jit``, with NRT, is for the few functions that allocate (once per segment, not per
byte) and for those that hand arrays to Python. Its ``_nrt=True`` is explicit because Numba
lets a callee that does not set it inherit its caller's: called from a kernel, an
allocating function would otherwise compile without NRT and fail. The named views of the
parameters, activations and segment buffers are built by one inlined body each and come in
two forms: ``weight_views`` (a kernel, for kernels) and ``weight_views_py`` (counted, for
Python: the array handed to Python keeps its buffer alive; a kernel's view handed to
Python would be its whole buffer). A counted function must not call the kernel form: it
would count down a reference that was never counted up.
"""

from numba import njit

# Allocating functions and those that hand arrays to Python.
jit = njit(cache=True, error_model="numpy", nogil=True, _nrt=True)
jit_inline = njit(cache=True, error_model="numpy", nogil=True, inline="always")

# Everything on the per-byte path, the Mamba's and the predictor's.
kernel = njit(cache=True, error_model="numpy", nogil=True, _nrt=False)
kernel_inline = njit(cache=True, error_model="numpy", nogil=True, _nrt=False, inline="always")
