"""OPT for a generate run's trace, with the pipeline's own code (residency.core.trace reads
trace.bin, residency.analysis.belady runs Belady's MIN), for llama_test's D/OPT check.

Usage: python opt_of_trace.py TRACE_BIN CAPACITY_CHUNKS  ->  one JSON line on stdout:
{"accesses": N, "trace_misses": N, "opt_misses": N}
"""

import json
import sys
from pathlib import Path

# This checkout's pipeline package, whatever the Python has installed.
sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "workflow"))

from residency.analysis import belady
from residency.core import trace  # noqa: E402

t = trace.read(sys.argv[1])
ref = t.reference()
misses = int(((t.accesses["flags"] & trace.FLAG_MISS) != 0).sum())
print(json.dumps({"accesses": len(ref), "trace_misses": misses,
                  "opt_misses": belady.opt_misses(ref, int(sys.argv[2]))}))
