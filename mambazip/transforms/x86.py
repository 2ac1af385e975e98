"""x86 E8/E9 filter: relative call and jump targets become absolute addresses.

A call (E8) or jump (E9) is followed by a 32-bit displacement from the next instruction.
The same function called from many places has many displacements but one address, which a
predictor can learn. Like xz's BCJ filter, only displacements that look like near targets
are changed: those whose top byte is 00 or FF, i.e. in [-2^24, 2^24). The sum with the
position is taken modulo 2^25 and brought back into that range, so a changed value again
has top byte 00 or FF.

Why it inverts exactly: both sides scan left to right, and every E8/E9 they look at is
examined, then the scan jumps past its four operand bytes whether or not it changed them.
Only operand bytes of examined opcodes are ever changed and those are never examined, so
the decoder meets the same opcode bytes at the same places; at each one the top byte is 00
or FF after the filter exactly when it was before. An opcode whose operand runs past the end
of the data is left alone, on both sides.
"""

from __future__ import annotations

import numpy as np

_SPAN = 1 << 25
_HALF = 1 << 24

# Executable headers whose machine field says x86 or x86-64.
_ELF_MACHINES = (3, 62)
_PE_MACHINES = (0x14C, 0x8664)


def _examined(data: np.ndarray) -> np.ndarray:
    """Positions of the E8/E9 bytes the scan examines (each then skips its operand)."""
    n = len(data)
    candidates = np.flatnonzero((data[: max(n - 4, 0)] & 0xFE) == 0xE8)
    chosen = []
    next_free = 0
    # A loop over the opcode candidates only (about 1 % of code bytes), not over every byte.
    for c in candidates.tolist():
        if c >= next_free:
            chosen.append(c)
            next_free = c + 5
    return np.asarray(chosen, dtype=np.int64)


def _operands(data, at):
    """The 32-bit little-endian operands after each opcode in ``at``, as int64."""
    b = [data[at + k].astype(np.int64) for k in range(1, 5)]
    return b[0] | (b[1] << 8) | (b[2] << 16) | (b[3] << 24)


def _apply(data: bytes, base: int, sign: int) -> bytes:
    arr = np.frombuffer(data, dtype=np.uint8).copy()
    at = _examined(arr)
    if len(at):
        top = arr[at + 4]
        at = at[(top == 0x00) | (top == 0xFF)]
        value = _operands(arr, at)
        value = np.where(value >= 1 << 31, value - (1 << 32), value)  # int32
        position = (at + 5 + base) % _SPAN
        moved = (value + sign * position) % _SPAN
        moved = np.where(moved >= _HALF, moved - _SPAN, moved) & 0xFFFFFFFF
        for k in range(4):
            arr[at + 1 + k] = (moved >> (8 * k)) & 0xFF
    return arr.tobytes()


def encode(data: bytes, base: int = 0) -> bytes:
    """``data`` with near call/jump displacements made absolute; ``base`` is the position of
    ``data[0]`` in its file."""
    return _apply(data, base, +1)


def decode(data: bytes, base: int = 0) -> bytes:
    """The exact inverse of ``encode`` with the same ``base``."""
    return _apply(data, base, -1)


def is_executable(data: bytes) -> bool:
    """An ELF or PE header for x86 or x86-64 at the start."""
    if data[:4] == b"\x7fELF" and len(data) >= 20:
        machine = int.from_bytes(data[18:20], "little" if data[5] == 1 else "big")
        return machine in _ELF_MACHINES
    if data[:2] == b"MZ" and len(data) >= 64:
        pe = int.from_bytes(data[60:64], "little")
        if pe + 6 <= len(data) and data[pe : pe + 4] == b"PE\0\0":
            return int.from_bytes(data[pe + 4 : pe + 6], "little") in _PE_MACHINES
    return False


def looks_like_code(data: bytes) -> bool:
    """An x86 header, or enough E8/E9 opcodes whose operands look like near targets.

    In x86 code most examined E8/E9 are calls and jumps to nearby code (top operand byte 00
    or FF); in random bytes 2 in 256 are, and text has few E8/E9 bytes at all."""
    if is_executable(data):
        return True
    arr = np.frombuffer(data, dtype=np.uint8)
    at = _examined(arr)
    if len(at) < max(16, len(arr) // 2048):
        return False
    top = arr[at + 4]
    near = np.count_nonzero((top == 0x00) | (top == 0xFF))
    return near * 4 >= len(at)
