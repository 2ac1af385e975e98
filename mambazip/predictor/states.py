"""Nonstationary bit-history states: a node's bits seen, as counts that forget, in one byte.

A state stands for (n0, n1, last): how many 0s and 1s the node has seen, discounted, and the
last bit. State 0 is the node never seen (0, 0, 0). On a bit b:
    1. b's count grows by one;
    2. the other count is discounted: kept up to 2, above 2 halved plus one (3 -> 2, 4 -> 3,
       5 -> 3, 6 -> 4, 10 -> 6, 50 -> 26): a context that changes its mind forgets fast;
    3. while the pair lies outside BOUNDS (the smaller count k must be < len(BOUNDS), the
       larger at most BOUNDS[k]), the other count drops by one, or b's own count where the
       other is 0: a long run after a rare opposite bit ends as a pure run, and a pure run
       stops at BOUNDS[0];
    4. last = b.
The states are those reachable from state 0 (239 of them), numbered by (n0 + n1, n0, last),
state 0 first. The table is built at import by integer Python alone, so every platform has
the same one:
    NEXT (256, 2) uint8    the state after bit 0 / 1 (rows past N_STATES: 0)
    N0, N1, LAST (256,) int64 each state's counts and last bit (0 past N_STATES)
Against the raw last 6 bits (context.history_next), a state tells a context seen 30 times with
always 1 from one seen 6 times, and keeps how often a context changed its mind; it forgets the
order of all bits but the last.
"""

import numpy as np

BOUNDS = (50, 22, 11, 7, 5, 4)


def discount(n):
    """The count of the bit not seen: kept up to 2, else halved plus one."""
    return n if n <= 2 else n // 2 + 1


def _allowed(n0, n1):
    low, high = min(n0, n1), max(n0, n1)
    return low < len(BOUNDS) and high <= BOUNDS[low]


def next_counts(n0, n1, bit):
    """(n0, n1) after bit, by the rule of the module docstring."""
    if bit:
        n0, n1 = discount(n0), n1 + 1
    else:
        n0, n1 = n0 + 1, discount(n1)
    while not _allowed(n0, n1):
        if bit:
            n0, n1 = (n0 - 1, n1) if n0 > 0 else (n0, n1 - 1)
        else:
            n0, n1 = (n0, n1 - 1) if n1 > 0 else (n0 - 1, n1)
    return n0, n1


def _build():
    empty = (0, 0, 0)
    seen, todo = {empty}, [empty]
    while todo:
        n0, n1, _ = todo.pop()
        for bit in (0, 1):
            state = (*next_counts(n0, n1, bit), bit)
            if state not in seen:
                seen.add(state)
                todo.append(state)
    order = sorted(seen, key=lambda s: (s[0] + s[1], s[0], s[2]))
    number = {s: k for k, s in enumerate(order)}
    nxt = np.zeros((256, 2), np.uint8)
    counts = np.zeros((3, 256), np.int64)
    for s, k in number.items():
        counts[:, k] = s
        for bit in (0, 1):
            nxt[k, bit] = number[(*next_counts(s[0], s[1], bit), bit)]
    return len(order), nxt, counts


N_STATES, NEXT, _COUNTS = _build()
N0, N1, LAST = _COUNTS


def state_of(n0, n1, last):
    """The number of the state with these counts and last bit (ValueError: no such state)."""
    for k in range(N_STATES):
        if N0[k] == n0 and N1[k] == n1 and (LAST[k] == last or n0 + n1 == 0):
            return k
    raise ValueError(f"no state ({n0}, {n1}, last {last})")
