"""Where the blocks of a raw deflate stream end, counted in inflated bytes (RFC 1951).

zlib ends a block when its symbol buffer is full; GNU gzip and Info-ZIP's zip also end one
early when a guess says the block compresses well enough. Given those block ends, zlib
reproduces such a stream by flushing with ``Z_BLOCK`` at each of them (a flush that ends the
block without writing anything else). Python's zlib does not report block ends, so this
module reads the stream's block headers and Huffman codes itself; it decodes symbols only to
count bytes and never builds the inflated data. It runs only on streams zlib has already
inflated, and at most ``max_blocks`` blocks are read.
"""

from __future__ import annotations

_LENGTH_BASE = (3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83)
_LENGTH_BASE += (99, 115, 131, 163, 195, 227, 258)
_LENGTH_EXTRA = (0,) * 8 + (1,) * 4 + (2,) * 4 + (3,) * 4 + (4,) * 4 + (5,) * 4 + (0,)
_DIST_EXTRA = (0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11)
_DIST_EXTRA += (12, 12, 13, 13)
_CODE_ORDER = (16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15)


class _InvalidError(Exception):
    pass


def _table(lengths):
    """(table, bits): table[next ``bits`` input bits, first bit lowest] = symbol << 4 | length
    for a canonical Huffman code; 0 where no code matches."""
    bits = max(lengths, default=0)
    if bits == 0:
        return [0], 0
    count = [0] * (bits + 1)
    for n in lengths:
        count[n] += 1
    count[0] = 0
    code, first = 0, [0] * (bits + 1)
    for n in range(1, bits + 1):
        code = (code + count[n - 1]) << 1
        first[n] = code
    table = [0] * (1 << bits)
    for symbol, n in enumerate(lengths):
        if n:
            c = first[n]
            first[n] += 1
            reversed_code = int(f"{c:0{n}b}"[::-1], 2)
            for k in range(reversed_code, 1 << bits, 1 << n):
                table[k] = symbol << 4 | n
    return table, bits


_FIXED = (_table([8] * 144 + [9] * 112 + [7] * 24 + [8] * 8), _table([5] * 30))


def block_ends(raw, max_blocks=4096):
    """The inflated offset at which each block of ``raw`` ends, the last being the whole
    length; None if the stream is not valid deflate or has more than ``max_blocks`` blocks."""
    try:
        return _block_ends(bytes(raw) + bytes(8), max_blocks)
    except (_InvalidError, IndexError):
        return None


def _block_ends(raw, max_blocks):
    pos = 0  # in bits
    limit = 8 * (len(raw) - 8)

    def take(n):
        nonlocal pos
        at = pos >> 3
        value = (int.from_bytes(raw[at : at + 4], "little") >> (pos & 7)) & ((1 << n) - 1)
        pos += n
        if pos > limit:
            raise _InvalidError
        return value

    def symbol(table, bits):
        nonlocal pos
        at = pos >> 3
        entry = table[(int.from_bytes(raw[at : at + 4], "little") >> (pos & 7)) & ((1 << bits) - 1)]
        if entry == 0:
            raise _InvalidError
        pos += entry & 15
        return entry >> 4

    out, ends = 0, []
    while len(ends) < max_blocks:
        final, kind = take(1), take(2)
        if kind == 0:
            pos = (pos + 7) & ~7
            n = take(16)
            if take(16) != n ^ 0xFFFF:
                raise _InvalidError
            pos += 8 * n
            out += n
        elif kind == 3:
            raise _InvalidError
        else:
            (lit, lit_bits), (dist, dist_bits) = _FIXED if kind == 1 else _dynamic(take, symbol)
            while True:
                s = symbol(lit, lit_bits)
                if s < 256:
                    out += 1
                elif s == 256:
                    break
                else:
                    s -= 257
                    out += _LENGTH_BASE[s] + take(_LENGTH_EXTRA[s])
                    take(_DIST_EXTRA[symbol(dist, dist_bits)])
        if pos > limit:
            raise _InvalidError
        ends.append(out)
        if final:
            return tuple(ends)
    return None


def _dynamic(take, symbol):
    n_lit, n_dist, n_code = take(5) + 257, take(5) + 1, take(4) + 4
    code_lengths = [0] * 19
    for i in range(n_code):
        code_lengths[_CODE_ORDER[i]] = take(3)
    code, code_bits = _table(code_lengths)
    lengths = []
    while len(lengths) < n_lit + n_dist:
        s = symbol(code, code_bits)
        if s < 16:
            lengths.append(s)
        elif s == 16:
            if not lengths:
                raise _InvalidError
            lengths += [lengths[-1]] * (3 + take(2))
        else:
            lengths += [0] * ((3 + take(3)) if s == 17 else (11 + take(7)))
    return _table(lengths[:n_lit]), _table(lengths[n_lit : n_lit + n_dist])
