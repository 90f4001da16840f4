"""The fault campaign's cell vocabulary, written once (reference 004 §5.4, Table 7): the
cells in Table 7's order, which must fail closed, and which need reads in flight together.
The engine's names are `engine/src/source/fault.cpp` (to_string); the config check
(core.config) and the campaign (campaigns.fault_cells) read these."""

CONTROL = "none"
CELLS = ("none", "short-read", "eio", "bundle-extent-failure", "stale-completion", "wrong-object", "out-of-order",
         "held-consumer", "reset-outstanding", "shutdown-live-consumer")
FATAL = frozenset({"short-read", "eio", "bundle-extent-failure", "stale-completion", "wrong-object"})
# Cells that need reads in flight together: an asynchronous source (uring) with windows >= 2.
NEEDS_DEPTH = frozenset({"out-of-order", "reset-outstanding"})
