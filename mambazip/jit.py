"""The one compilation policy of every Numba kernel, the Mamba's and the predictor's.

Never fastmath (DESIGN.md: no reassociation, no contraction to FMA, no approximate
functions); ``error_model="numpy"`` so that integer code carries no division-by-zero
branches; ``cache=True`` so that a run after the first loads the compiled code; ``nogil``
so that an overlapped update (kernels/segment.py) runs on its thread while the coding
thread is in compiled code, not only when Python's switch interval passes the lock on.

The Mamba's kernels (``kernels/``) return and build array views, which need Numba's
reference counting (NRT). The predictor's kernels allocate nothing and take arrays allocated
once in Python, so they compile without it (``_nrt=False``), its per-byte drivers too (they
carve the named views out of the flat buffers: a view of an array the caller holds needs no
count of its own). With NRT, every call from compiled code increments and decrements the
count of each array it passes (atomic operations): in the per-node helpers that was two
thirds of the predictor's run time, and with the drivers still counted a further fifth of
the context side's (fast preset, enwik6: 42-44 -> 26-28 µs/byte, 2026-12-06,
scripts/profile_predictor.py).
"""

from numba import njit

# The Mamba's kernels, and the small ones inlined into them.
jit = njit(cache=True, error_model="numpy", nogil=True)
jit_inline = njit(cache=True, error_model="numpy", nogil=True, inline="always")

# The predictor's per-node kernels and per-byte drivers.
kernel = njit(cache=True, error_model="numpy", nogil=True, _nrt=False)
kernel_inline = njit(cache=True, error_model="numpy", nogil=True, _nrt=False, inline="always")
