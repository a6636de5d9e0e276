"""Every tuning constant of modlin, with the measurement that set it.

Costs, thresholds and chunk sizes live here and nowhere else: the planner's cost model,
the schedulers' and kernels' block sizes, the memory shares. Each comes with the note of
what was measured (machine, sizes, benchmark), so rerunning that benchmark elsewhere says
whether it still holds. Nothing here imports the rest of the package.
"""

from __future__ import annotations



#: Modelled cost, in multiply-adds of a large fp64 GEMM per output entry, of adding
#: one k-panel's partial product into the result (one element-wise pass).
COMBINE_PASS = 40.0
