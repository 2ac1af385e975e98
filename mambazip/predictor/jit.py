"""The one compilation policy of the predictor's kernels.

Every kernel works on arrays allocated once in Python and none allocates, so they are compiled
without NRT reference counting (``_nrt=False``): with it, each call of a per-node helper
incremented and decremented the count of each array it takes (atomic operations), which was
two thirds of the run time (the drivers below keep NRT). Never fastmath (DESIGN.md);
``error_model="numpy"`` so that integer code carries no division-by-zero branches.
"""

from numba import njit

kernel = njit(cache=True, error_model="numpy", _nrt=False)
kernel_inline = njit(cache=True, error_model="numpy", _nrt=False, inline="always")
# The per-byte drivers carve the named views out of the flat buffers (array views need NRT);
# they run once per byte, so their reference counting costs little.
driver = njit(cache=True, error_model="numpy")
driver_inline = njit(cache=True, error_model="numpy", inline="always")
