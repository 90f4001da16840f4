"""The arm vocabulary (docs/design.md), in one place: code names, reference letters, sources.

Code, config, run records and Parquet use the code names; tables and figures print the
reference letter. Every other module takes its names and letters from here.
"""

from __future__ import annotations

# ---- the pager study (reference 000) ----------------------------------------------------

KERNEL_MMAP = "kernel-mmap"        # A: plain file mmap, the kernel's page cache decides
PAGER_LRU = "pager-lru"            # C: the userfaultfd pager with LRU eviction
PAGER_DECLARED = "pager-declared"  # D (declared): evict the chunk whose next use is farthest
PAGER_PREFETCH = "pager-prefetch"  # E: D plus prefetch of the next declared chunks
PAGER_ZERO = "pager-zero"          # no reuse: not an arm of the reference; letter Z here
# Per-layer LRU-k (policy lru_k_per_layer, `--lru-k K`): claim C7's cache against pager-zero,
# generate only; not an arm of the pager study's sweep (no letter).
PAGER_LRU_K = "pager-lru-k"

# Run arms in the reference's order; the order is also that of the figures' legends.
PAGER_LETTER = {KERNEL_MMAP: "A", PAGER_LRU: "C", PAGER_DECLARED: "D", PAGER_PREFETCH: "E", PAGER_ZERO: "Z"}
PAGER_ARMS = tuple(PAGER_LETTER)

# The offline Belady bound over a run's recorded trace: a bound, never a run arm.
BELADY = "belady"
OPT = "OPT"


def letter(arm: str) -> str:
    """The reference letter of a pager-study arm; '?' for a name outside the vocabulary."""
    return PAGER_LETTER.get(arm, "?")


def labelled(arm: str, template: str) -> str:
    """A display label: `template` with the arm's letter in place of {letter}."""
    return template.format(letter=letter(arm))


# ---- the matched source campaign (reference 004 §5.3) -----------------------------------

BUFFERED = "P"  # pread through the page cache
DIRECT = "D"    # D (direct): blocking O_DIRECT into one window
ASYNC = "F"     # io_uring O_DIRECT, several windows, bounded in-flight depth
ORACLE = "oracle"  # the same-build synchronous-source control cell (no host limit)

# residctl's --source engine of each source arm; the oracle reads like D.
SOURCE_ENGINE = {BUFFERED: "buffered", DIRECT: "direct", ASYNC: "uring"}
SOURCE_ARMS = tuple(SOURCE_ENGINE)
PAIRED = (DIRECT, ASYNC)  # the two arms of every matched pair, in ratio order (F/D)
