"""The Belady bound: the fewest misses any replacement policy can have on a trace.

`opt_misses` runs Belady's MIN (evict the resident chunk whose next use is farthest) over
a recorded chunk reference trace with a fixed capacity in chunks; MIN is optimal for
demand paging, so its count is the floor the pager arms are measured against (D/OPT).
`cyclic_scan_opt` is the closed form for a cyclic scan, used to cross-check.

`step_held_min_misses` is MIN under the pager's own constraint: the chunks a step has
touched stay resident until the step ends (its compute threads read them in parallel,
so the pager holds the whole object while it computes), which OPT over the access trace
does not have to respect. It is a reference that explains a D/OPT gap, not a bound.
"""

from __future__ import annotations

import heapq
from typing import Sequence

NEVER = float("inf")


def next_use(trace: Sequence[int]) -> list[float]:
    """For each position, the position of the next access to the same chunk (inf if none)."""
    out: list[float] = [NEVER] * len(trace)
    last: dict[int, int] = {}
    for i in range(len(trace) - 1, -1, -1):
        out[i] = last.get(trace[i], NEVER)
        last[trace[i]] = i
    return out


def opt_misses(trace: Sequence[int], capacity: int) -> int:
    """Misses of Belady's MIN on `trace` with room for `capacity` chunks (O(n log n))."""
    if capacity < 1:
        raise ValueError(f"capacity must be at least 1 chunk, got {capacity}")
    nxt = next_use(trace)
    resident: dict[int, float] = {}  # chunk -> position of its next use
    heap: list[tuple[float, int]] = []  # (-next use, chunk); stale entries skipped lazily
    misses = 0
    for i, chunk in enumerate(trace):
        if chunk not in resident:
            misses += 1
            if len(resident) >= capacity:
                while True:
                    neg, victim = heapq.heappop(heap)
                    if resident.get(victim) == -neg:
                        break
                del resident[victim]
        resident[chunk] = nxt[i]
        heapq.heappush(heap, (-nxt[i], chunk))
    return misses


def step_held_min_misses(trace: Sequence[int], steps: Sequence[int], capacity: int) -> int:
    """Misses of MIN when the chunks accessed in the current step may not be evicted before
    the step ends (if only they are resident, the farthest of them goes). O(n log n)."""
    if capacity < 1:
        raise ValueError(f"capacity must be at least 1 chunk, got {capacity}")
    if len(steps) != len(trace):
        raise ValueError("trace and steps differ in length")
    nxt = next_use(trace)
    resident: dict[int, float] = {}
    heap: list[tuple[float, int]] = []
    held: set[int] = set()
    step = None
    misses = 0
    for i, chunk in enumerate(trace):
        if steps[i] != step:
            step, held = steps[i], set()
        if chunk not in resident:
            misses += 1
            if len(resident) >= capacity:
                skipped: list[tuple[float, int]] = []
                victim = None
                while heap:
                    neg, c = heapq.heappop(heap)
                    if resident.get(c) != -neg:
                        continue  # stale
                    if c in held:
                        skipped.append((neg, c))
                        continue
                    victim = c
                    break
                if victim is None:  # every resident chunk is held: the farthest of them
                    skipped.sort()
                    victim = skipped.pop(0)[1]
                for e in skipped:
                    heapq.heappush(heap, e)
                del resident[victim]
        resident[chunk] = nxt[i]
        heapq.heappush(heap, (-nxt[i], chunk))
        held.add(chunk)
    return misses


def cyclic_scan_opt(chunks: int, capacity: int, passes: int) -> int:
    """Closed form of opt_misses for `passes` scans of chunks 0..chunks-1.

    After the cold pass MIN keeps capacity-1 chunks and cycles the last slot, so the
    remaining (passes-1)*chunks accesses repeat a period of chunks-1 accesses:
    capacity-1 hits, then chunks-capacity misses.
    """
    if chunks < 1 or capacity < 1 or passes < 0:
        raise ValueError("chunks and capacity must be >= 1 and passes >= 0")
    if passes == 0:
        return 0
    if capacity >= chunks:
        return chunks
    if capacity == 1:
        return chunks * passes
    q, r = divmod((passes - 1) * chunks, chunks - 1)
    return chunks + q * (chunks - capacity) + max(0, r - (capacity - 1))
