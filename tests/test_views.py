"""kernels.views: carve, a shaped view into a flat buffer, as slicing and reshaping would give;
copy_into, an array assignment without reference counting."""

import numpy as np
import pytest
from numba import njit

from mambazip.jit import kernel
from mambazip.kernels.views import carve, copy_into


@njit(cache=True)
def _carve_2d(flat, start, rows, cols):
    return carve(flat, start, (rows, cols))


@kernel
def _copy_rows(a, dst, src):
    copy_into(a[dst : dst + 3], a[src : src + 3])


@kernel
def _copy(dst, src):
    copy_into(dst, src)


@njit(cache=True)
def _write_through(flat, start):
    view = carve(flat, start, (2, 3))
    view[1, 2] = -1.0


def test_carve_equals_slice_and_reshape():
    flat = np.arange(40, dtype=np.float32)
    view = _carve_2d(flat, 7, 3, 5)
    assert np.array_equal(view, flat[7:22].reshape(3, 5))
    assert view.flags.c_contiguous


def test_carve_shares_memory_with_the_buffer():
    flat = np.zeros(10, dtype=np.float32)
    _write_through(flat, 2)
    assert flat[2 + 1 * 3 + 2] == -1.0
    assert np.count_nonzero(flat) == 1


def test_carve_keeps_the_buffer_alive():
    view = _carve_2d(np.arange(12, dtype=np.float32), 0, 3, 4)
    assert view.sum() == sum(range(12))


def test_carve_refuses_a_view_past_the_end():
    with pytest.raises(IndexError):
        _carve_2d(np.zeros(10, dtype=np.float32), 5, 2, 3)


def test_carve_of_a_read_only_buffer_is_read_only():
    flat = np.zeros(6, dtype=np.float32)
    flat.setflags(write=False)
    assert not _carve_2d(flat, 0, 2, 3).flags.writeable


def test_copy_into_copies_every_element():
    src = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    dst = np.zeros_like(src)
    _copy(dst, src)
    assert np.array_equal(dst, src)


@pytest.mark.parametrize("dst, src", [(0, 2), (2, 0)])
def test_copy_into_overlapping_rows_is_numpys_assignment(dst, src):
    a = np.arange(10, dtype=np.int64)
    expected = a.copy()
    expected[dst : dst + 3] = expected[src : src + 3]
    _copy_rows(a, dst, src)
    assert np.array_equal(a, expected)


def test_copy_into_refuses_arrays_of_other_shapes():
    with pytest.raises(ValueError):
        _copy(np.zeros((2, 3), np.float32), np.zeros((3, 2), np.float32))
