"""x86 filter: relative call, jump and RIP-relative operands become absolute addresses.

A call (E8) or jump (E9, or 0F 80..8F, a conditional jump) is followed by a 32-bit
displacement from the next instruction; so is an x86-64 instruction addressing memory
RIP-relative: one of the opcodes in ``_RIP_OPCODES`` (mov, lea, add, cmp, test, call and
jmp through memory, ...), optionally after a REX prefix (40..4F), then a ModRM byte with mod
00 and r/m 101. The same function or variable reached from many places has many
displacements but one address, which a predictor can learn. Like xz's BCJ filter, only
displacements that look near are changed: those whose top byte is 00 or FF, i.e. in
[-2^24, 2^24). The sum with the position just after the displacement is taken modulo 2^25
and brought back into that range, so a changed value again has top byte 00 or FF. (For an
instruction with an immediate after the displacement that position is not the next
instruction's, but it is the same for every instruction of its kind, which is what the
predictor needs.)

Why it inverts exactly: both sides scan left to right; at each instruction start they
examine, they change or keep its operand, then jump past the operand either way. Only
operand bytes are ever changed. The test at a position reads that byte and at most the
next two, and none of those can lie in the operand of an instruction examined later: the
byte after the start could only be in the operand of an instruction one byte on, which
begins two bytes on at the earliest; the second byte on is read only when the first is one
of ``_RIP_OPCODES``, and no instruction starting with one of those has its operand one byte
on (only E8 and E9 do). So the decoder examines the same places, and at each one the top
byte is 00 or FF after the filter exactly when it was before. An operand that runs past the
end of the data is left alone, on both sides.
"""

from __future__ import annotations

import numpy as np

_SPAN = 1 << 25
_HALF = 1 << 24

# Opcodes (one byte, or after a REX prefix) whose ModRM may address memory RIP-relative; on
# /bin/ls with the fast preset this set gained 0.8 % over mov, lea and store alone.
_RIP_OPCODES = np.zeros(256, dtype=bool)
_RIP_OPCODES[[0x01, 0x03, 0x09, 0x0B, 0x21, 0x23, 0x29, 0x2B, 0x31, 0x33, 0x39, 0x3B]] = True
_RIP_OPCODES[[0x63, 0x80, 0x81, 0x83, 0x85, 0x89, 0x8B, 0x8D, 0xC7, 0xF6, 0xFF]] = True

# Executable headers whose machine field says x86 or x86-64.
_ELF_MACHINES = (3, 62)
_PE_MACHINES = (0x14C, 0x8664)


def _candidates(data: np.ndarray):
    """(start, operand offset) of every place an instruction with a rel32 operand may begin."""
    n = len(data)
    nxt = np.zeros(n, dtype=np.uint8)
    nxt[:-1] = data[1:]
    nxt2 = np.zeros(n, dtype=np.uint8)
    nxt2[:-2] = data[2:]
    call = (data & 0xFE) == 0xE8
    jcc = (data == 0x0F) & ((nxt & 0xF0) == 0x80)
    rex = ((data & 0xF0) == 0x40) & _RIP_OPCODES[nxt] & ((nxt2 & 0xC7) == 0x05)
    rip = _RIP_OPCODES[data] & ((nxt & 0xC7) == 0x05)
    at = np.flatnonzero(call | jcc | rex | rip)
    operand = np.select([call[at], rex[at]], [1, 3], 2)
    return at, operand


def _examined(data: np.ndarray) -> np.ndarray:
    """Operand positions of the instructions the scan examines (each then skips its
    operand); those whose operand would run past the end are not examined."""
    n = len(data)
    at, operand = _candidates(data)
    chosen = []
    next_free = 0
    # A loop over the candidates only (a few % of code bytes), not over every byte.
    for start, op in zip(at.tolist(), operand.tolist(), strict=True):
        if start >= next_free and start + op + 4 <= n:
            chosen.append(start + op)
            next_free = start + op + 4
    return np.asarray(chosen, dtype=np.int64)


def _operands(data, at):
    """The 32-bit little-endian operands at each position in ``at``, as int64."""
    b = [data[at + k].astype(np.int64) for k in range(4)]
    return b[0] | (b[1] << 8) | (b[2] << 16) | (b[3] << 24)


def _near(arr):
    """Operand positions the filter changes: examined, top byte 00 or FF."""
    at = _examined(arr)
    top = arr[at + 3]
    return at[(top == 0x00) | (top == 0xFF)]


def _moved(arr, at, base, sign):
    """The operands at ``at`` moved by their position, as uint32 in int64."""
    value = _operands(arr, at)
    value = np.where(value >= 1 << 31, value - (1 << 32), value)  # int32
    position = (at + 4 + base) % _SPAN
    moved = (value + sign * position) % _SPAN
    return np.where(moved >= _HALF, moved - _SPAN, moved) & 0xFFFFFFFF


def _apply(data: bytes, base: int, sign: int) -> bytes:
    arr = np.frombuffer(data, dtype=np.uint8).copy()
    at = _near(arr)
    moved = _moved(arr, at, base, sign)
    for k in range(4):
        arr[at + k] = (moved >> (8 * k)) & 0xFF
    return arr.tobytes()


def encode(data: bytes, base: int = 0) -> bytes:
    """``data`` with near displacements made absolute; ``base`` is the position of
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
    """An x86 header, or enough examined instructions whose operands look near and whose
    absolute targets repeat.

    In x86 code most examined places are calls, jumps and addresses near the instruction
    (top operand byte 00 or FF), and the same function or variable is the target of many
    (over half the targets repeat in /bin/ls and python3.11). In random bytes 2 in 256
    operands look near; in a mostly blank bitmap (calgary/pic) many do, but their targets,
    zero plus a different position each, do not repeat."""
    if is_executable(data):
        return True
    arr = np.frombuffer(data, dtype=np.uint8)
    examined = len(_examined(arr))
    at = _near(arr)
    if examined < max(16, len(arr) // 2048) or len(at) * 4 < examined:
        return False
    targets = _moved(arr, at, 0, +1)
    return (len(at) - len(np.unique(targets))) * 4 >= len(at)
