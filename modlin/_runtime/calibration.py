"""Every tuning constant of modlin, with the measurement that set it.

Costs, thresholds and chunk sizes live here and nowhere else: the planner's cost model,
the schedulers' and kernels' block sizes, the memory shares. Each comes with the note of
what was measured (machine, sizes, benchmark), so rerunning that benchmark elsewhere says
whether it still holds. Nothing here imports the rest of the package.
"""

from __future__ import annotations

# ---- The cost model of multiword plans (modlin._planning.plan) -----------------------

# Cost model, in units of one fp64 multiply-add of a large GEMM. Measured on the
# 2-core development machine (numpy/OpenBLAS): a GEMM with inner dimension kb runs
# at about kb/(kb + GEMM_K_OVERHEAD) of peak, and one element-wise pass over an m x n
# float64 array costs about PASS multiply-adds per entry.
GEMM_K_OVERHEAD = 24.0
GEMM_MN_OVERHEAD = 16.0
PASS = 40.0
WORD_PASS = 25.0

#: Memory bandwidth (GB/s) of the element-wise passes on ``c`` cores, ``(c, BW(c))``:
#: measured here for 1 and 2 (the reduction pass), assumed for 16 cores on one socket
#: and 64 on two (docs/guide/large.rst); log-log interpolation between, flat beyond.
BANDWIDTH = ((1, 14.0), (2, 25.0), (16, 150.0), (64, 300.0))

#: The cores :data:`PASS` and :data:`WORD_PASS` were measured on.
CALIBRATION_THREADS = 2

#: A multiword plan's element-wise passes on a GPU (CuPy array expressions), relative to
#: their cost on the calibration machine, both in GEMM times: the GPU's DGEMM outruns its
#: memory bandwidth several times more than two cores do. Measured on an H200
#: (``benchmarks/gpu_report.py``, the 31-bit (1,2) plan at n = 4096 and 8192): 6.25 and 6.01.
GPU_PASS_SCALE = 6.1


# ---- The cost model of residue number systems (modlin._planning.rnsplan) -------------

#: Int32 products are made in panels of at least this many rows of ``A`` (or all of them)
#: when the budget allows it with groups of several moduli: dgemm at k = 1024, n = 2048 on
#: the development machine ran 89 GFlop/s on 1024 and 2048 rows, 81 on 512, 72 on 256, 45 on 64.
GEMM_ROWS = 1024

# Cost model, in multiply-adds of a large fp64 GEMM (as in modlin._planning.plan), measured
# on the 2-core development machine at n = 2048 (the passes cost more per entry
# there than at n = 1024: more of them miss the caches): per input entry, lifting
# it into 16-bit pieces and its balanced residue per modulus; per output entry,
# its CRT weight per modulus, the sum of weights times 16-bit limbs (a small GEMM)
# per modulus and limb, and the carries and the reduction modulo p per limb. Modulo a
# p < 2**63 the CRT is one fused pass instead (modlin._arith.crt._crt_modp): the weights, two
# integer multiply-adds per modulus and one reduction, measured at a third of the limbs'
# time for six moduli (6-9 against 18-29 ns per entry).
#
# RESIDUE was measured on the pieces' path. The residues of int64 operands (all operands
# modulo a p <= 2**64) now come straight from the entries, at about 18 per entry and
# modulus (modlin._arith.residues.RESIDUE_INT64), but RESIDUE is kept: priced so, the model would
# move 48- to 52-bit products at n >= 1000 from (2,3) multiword plans to five-modulus RNS
# ones, faster when the same product is repeated but slower when products of other plans
# come between, whose buffers the RNS' larger workspace does not find (50 bits, n = 2048,
# medians of 7 interleaved runs: 5.63 against 6.16 dgemm times repeated, 6.95 against
# 6.10 alternating).
LIFT = 60.0
RESIDUE = 150.0
WEIGH = 100.0
CRT_SUM = 8.0
LIMB = 120.0

#: Converting a Python int into 16-bit pieces (:func:`modlin._arith.pyints.to_halves`: its digits
#: read by a numba kernel) and balancing it, per piece: serial under the GIL, so a tile that
#: converts its operands' blocks again pays it again. Measured at 127 bits (8 pieces, 2048 x
#: 2048, medians of 7): 39.5 ns per entry against 93.6 through ``marshal`` (calibrated at 800
#: when the conversion went that way: 108 + 14 ns per entry against 0.0185 ns per
#: multiply-add of a 2048 dgemm on 2 cores), so 800 * 39.5 / 93.6.
OBJECT_PIECE = 340.0

#: Each group of moduli after the first reads the operands' pieces again to make its
#: residues (:meth:`RNSPlan.schedule`), per piece of an entry: measured at 127 bits (8 pieces)
#: on a 2048 x 2048 operand, 12 moduli in 1, 2, 3, 4, 6 and 12 groups took about 95, 50,
#: 45, 42, 40 and 38 ns per entry on 2 cores (2.5 to 5 ns per entry and extra group).
REREAD = 24.0

#: On a GPU those passes are fused kernels over data already on the device (one
#: residue kernel for all moduli, a reduction per modulus, one CRT kernel), priced
#: relative to their CPU cost, both in GEMM times. Measured on an H200
#: (``benchmarks/gpu_report.py``: the kernels timed apart against a DGEMM, 31-, 50- and
#: 61-bit p at n = 4096 and 8192): 1.70 to 2.12.
GPU_PASS_FACTOR = 1.9


# ---- Engines (modlin._engines.gemm) --------------------------------------------------

#: GEMM time per multiply-add relative to DGEMM on a GPU. int8: cuBLAS ``gemmEx`` in
#: the TN layout with int32 sums, ``B``'s transposed copy included, measured on an H200
#: (``benchmarks/gpu_report.py``, batches of 10 to 18 moduli): 0.090 of a DGEMM at
#: n = 4096, 0.074 to 0.078 at 8192 (the peak ratio, about 2000 dense int8 TOP/s to
#: 67 fp64 TFLOP/s, would be 1/30). fp32 is absent: without tensor cores it is no faster
#: than fp64 there, and TF32 tensor cores are not exact.
GPU_RELATIVE_COST = {"fp64": 1.0, "int8": 0.08}


# ---- Tiles and memory (modlin._planning.tiling, modlin._runtime.scratch) -------------

#: Tiles are never cut thinner than this (or the dimension itself): below it GEMMs
#: lose most of their speed, and a budget that needs thinner tiles is refused.
MIN_TILE = 64

#: Bytes of a GPU's free memory the tiles leave to cuBLAS' workspace, CuPy's kernels and
#: the pool's rounding, or a tenth of it where that is more: those allocations do not
#: shrink with the budget, and a tenth of a few hundred MiB is too thin a margin for them
#: (squeezed products on an H200, benchmarks/gpu_report.py).
GPU_RESERVE = 64 * 2**20

#: Idle scratch buffers kept between products: up to the whole memory budget while products
#: follow one another, then, :data:`POOL_DECAY` seconds after the last buffer fell idle, at
#: most this fraction of it.
POOL_SHARE = 0.25

#: Modelled cost of a byte of working memory a product maps afresh, in multiply-adds of a
#: large fp64 GEMM on 2 cores: the kernel zeroes and maps each page when it is first
#: written (0.2 s per GiB measured here, where the GEMM does 6e10 multiply-adds a second).
#: What lies beyond :data:`POOL_SHARE` of the budget is charged so, by the planner
#: (multiword against residue plans) and by :meth:`modlin.RNSPlan.schedule`.
FRESH_BYTE = 12.0

#: Seconds idle scratch beyond :data:`POOL_SHARE` of the budget is kept after the last
#: product: a loop of products finds its buffers again, a finished computation returns them.
POOL_DECAY = 2.0

#: Smaller scratch arrays are plain ``np.empty``: the C allocator reuses small blocks without
#: new pages, and a pool of many would be slow to search.
POOL_MIN = 2**20


# ---- Threads (modlin._engines.threads) -----------------------------------------------

#: Slabs are never thinner than this many rows: below it BLAS loses its speed
#: and the per-slab overhead (a task, a GEMM call per block) shows.
MIN_ROWS = 64

#: A residue number system's GEMMs (modlin._algorithms.rns) are split between the workers by
#: moduli, each taking whole GEMMs, rather than by slabs of rows, when the slabs would be thinner
#: than this: one-thread DGEMMs of 100 x 200 outputs ran at 0.46 to 0.67 of peak here, of
#: 200 x 200 ones at 0.84 to 0.87.
MODULI_SPLIT_ROWS = 128

#: Products with fewer multiply-adds than this run on the calling thread only,
#: with BLAS' own threads: splitting them costs more than it saves.
MIN_WORK = 2**25

#: GEMM calls deeper than this keep BLAS' own threads instead of slabs. Not for the GEMMs
#: themselves: two one-thread slabs match BLAS' two threads on a lone GEMM of any shape
#: measured with no BLAS thread still spinning (``benchmarks/slabs_vs_blas.py``: 0.86-1.04;
#: slabs timed just after a GEMM on BLAS' threads look up to twice as slow). A 61-bit
#: product at n = 4096 (k-blocks of 1024) measured the same either way (6.82 against 6.88
#: dgemm times); linalg's products below 64 bits keep BLAS' threads at every depth (:func:`blas_gemms`).
MAX_SLAB_K = 512

#: Entries per part of a flat pass (:func:`each`), at least.
MIN_ENTRIES = 2**16

#: Seconds over which :func:`free_cores` measures the other processes' CPU time (its reading
#: is reused that long): /proc/stat counts in ticks of 10 ms, so shorter windows are coarse.
BUSY_WINDOW = 0.2


# ---- Residues: chunks and steps (modlin._arith, modlin._algorithms.quantize) ---------

#: Entries per chunk of the 2M kernels (modlin._arith.modular) and of Ozaki-II's residue
#: kernels (modlin._algorithms.quantize): the chunk stays in the L1 cache between passes.
L1_CHUNK = 512

#: Entries processed together by the residue and CRT kernels (modlin._arith.residues,
#: modlin._arith.crt): their working set stays in cache.
RESIDUE_CHUNK = 2048

#: Entries per call of :func:`_piece_residues` in :meth:`Pieces16.residues`.
RESIDUE_STEP = 32768

#: Entries whose pieces :func:`_piece_residues` holds as floats at once (in the L1 cache).
PIECE_STEP = 256

#: Python ints converted to pieces at a time by :func:`object_pieces`: what the conversion
#: holds beside the pieces (a block's pieces; through ``marshal``, also its list and stream,
#: about ``3 H + 4`` bytes an entry) stays small.
OBJECT_STEP = 2**16

#: The most 16-bit pieces an integer may have (32768 bits): :class:`Pieces16` refuses more.
MAX_PIECES = 2**11

#: Cost of one residue of an int64 entry (:func:`_int64_residues`), in multiply-adds of a
#: large fp64 GEMM, for splitting it across workers: measured here at n = 2048 with six
#: moduli, 34 on one worker and 18 on two (the pieces' GEMMs they replaced: 48 and 35).
RESIDUE_INT64 = 30.0


# ---- The CRT (modlin._arith.crt) -----------------------------------------------------

#: Moduli summed by one product against the limb constants: each term is below
#: ``2**26 * 2**16``, so a sum of ``2**10`` of them plus the carries stays exact in float64.
CRT_BLOCK = 1024

#: The most moduli the fused CRT (:func:`_crt_modp`) takes (a :class:`Basis` keeps each below ``2**26``).
FUSED_MAX_N = 31


# ---- Python ints (modlin._arith.pyints) ----------------------------------------------

#: Entries per tile in the kernels that turn (pieces, entries) around.
PYINTS_BLOCK = 64

#: Entries whose pieces are gathered, row by row, before they are copied to the
#: output (E = 2**22, ns per entry: at H = 65, 39.5 for runs of 64 when E is
#: not a power of two, 35.0 for 256; at H = 9, 6.8 for 512, 6.3 for 256).
PYINTS_FLUSH = 256

#: Pieces per entry above which :func:`_objects_halves` gathers them in tiles of
#: :data:`PYINTS_FLUSH` entries (ns per entry at 127 / 256 / 1000 bits, 8 / 16 / 63 pieces, one
#: process with a test suite running beside it: 34 / 211 / 1404 written straight, 44 / 101 /
#: 237 through tiles; alone, 21 / 37 / 204 as chosen here).
PYINTS_TILED_PIECES = 8

#: Entries per marshal stream: one stream per chunk keeps its buffer small and
#: reused (in cache, and no fresh pages: one 170 MB stream for 2**22 entries of
#: 256 bits took 0.2-0.5 s more to write than chunks of this size).
PYINTS_STREAM_ENTRIES = 8192

#: First buffer of :func:`_write_marshal` at most this large: limbs sized well
#: above their values would otherwise reserve far more than the stream needs.
PYINTS_MAX_FIRST_BUFFER = 2**22


# ---- Ozaki-II (modlin.ozaki) -------------------------------------------------------

#: Modelled cost, in multiply-adds of a large fp64 GEMM, of one modulus' element-wise work
#: per operand entry (its residues or 2M images, made again for every tile that reads the
#: panel) and per result entry (combination, CRT), as measured on a 2-core machine: re-made
#: residues are what tiling costs. The operand pass is the fused 2M kernel's, quantising as
#: it reads, on both cores: 5.0-6.5 ns per complex entry and modulus inside a zgemm at
#: n = 4096, where a dgemm takes 0.023 ns per multiply-add.
OZAKI_OPERAND_PASS, OZAKI_RESULT_PASS = 250.0, 230.0
#: The same for adding the residues of one more k-panel, per result entry and modulus.
OZAKI_COMBINE_PASS = 60.0


# ---- The GPU (modlin._engines.cuda) --------------------------------------------------

#: Threads per block of the element-wise kernels (``kernels/modlin_kernels.cu``): a multiple
#: of the 32-thread warp that keeps every kernel's registers within one multiprocessor
#: (``tests/test_kernels.py`` reads them from ptxas for sm_80 and sm_90).
CUDA_THREADS = 256


# ---- Dask (modlin._front.dask) -------------------------------------------------------

#: Partials combined by one task of the tree along k (dask's reductions use 4 by default too:
#: a deeper tree adds tasks, a flatter one holds more partials at once).
SPLIT_EVERY = 4

#: A worker runs up to ``nthreads`` tasks at once and pauses at 80% of its memory limit; the
#: stored chunks and each task's operands and result live outside modlin's working budget,
#: so a task's budget is this fraction of the limit, shared among the worker's threads.
WORKER_MEMORY_SHARE = 4


# ---- Linear algebra (modlin.linalg) --------------------------------------------------

#: Blocks with at most this many rows and columns are eliminated by the base case.
#: Read at call time, so tests may lower it to exercise the recursion on small matrices.
PLUQ_THRESHOLD = 128

#: Triangles of at most this many rows are inverted outright (then one product).
#: Read at call time, so tests may lower it to exercise the recursion on small matrices.
TRIANGULAR_THRESHOLD = 128
# The same thresholds modulo primes beyond 64 bits (object residues, multi-limb base cases of
# modlin.linalg._bigmod): the base case costs more there against the RNS products. det / inv
# modulo 2**127 - 1 on the 2-core machine (s) at thresholds 128 / 64 / 32 / 16: n = 200:
# 0.120 / 0.086 / 0.106 / 0.221 and 0.275 / 0.210 / 0.341 / 0.503; n = 400: 0.448 / 0.314 /
# 0.381 / 0.636 and 1.03 / 0.74 / 1.03 / 2.2.
PLUQ_THRESHOLD_BIG = 64
TRIANGULAR_THRESHOLD_BIG = 64

#: Matrices of fewer rows go through the Krylov stages (read at call time, so tests may lower it).
MIN_BLOCK_KRYLOV = 96

#: Interpolation points per worker of the evaluations and determinants, at least (their
#: loops over points are the vectorised ones).
MIN_POINTS = 64

#: Steps of the display: percent of the modelled cost.
PROGRESS_STEPS = 100

#: One update ``c - l x mod p`` of the compiled int64 kernels (elimination, triangular
#: inverse): 1.0 to 1.7 ns, narrow to wide moduli. One thread: scaled by the cores.
KERNEL_UPDATE = 80.0

#: One update of the polynomial determinants' evaluations and eliminations at the
#: interpolation points (int64): 1.9 to 3.1 ns on two workers. Split across the threads
#: as the GEMMs are: not scaled.
POINT_UPDATE = 140.0

#: One update on Python ints (object arrays, moduli from ``2**63``): NumPy's loops call
#: Python's integer arithmetic, ``OBJECT_UPDATE + OBJECT_UPDATE_BITS * bits**1.6`` per
#: update of the elimination (290 ns at 64 bits, 500 at 200, 5200 at 1000, 33000 at 3000;
#: an exponent near that of Karatsuba's products), a third of it for a triangular inverse
#: (dot products), 0.4 of it for the determinants at the points. One thread: scaled.
OBJECT_UPDATE = 13500.0
#: One update of the compiled big-prime kernels (modlin.linalg._bigmod, moduli from 2**63 to
#: 2**512: rows with delayed reduction), per squared count of 32-bit limbs: about 1.3 to 1.8 L**2
#: ns with the pivots' inverses (21 ns at 4 limbs, 59 at 8; before the binary inverses 28 at 4,
#: 100 at 8, 131 at 10, 213 at 12, 474 at 16; elimination of 64 x 64 blocks, 2026-12-07, the
#: figures in modlin.linalg._bigmod's docstring), and for a triangular inverse 1.35 times that
#: (its rows are shorter). One thread: scaled.
BIG_UPDATE = 100.0
BIG_INVERSE = 1.35
OBJECT_UPDATE_BITS = 4.2
OBJECT_INVERSE = 1 / 3
OBJECT_POINTS = 0.4
#: Costs of :func:`modlin.linalg._bigmod.limb_product` beside its GEMMs, per entry and modulus,
#: in the multiply-adds of a large fp64 GEMM (0.0185 ns): the residues of an operand's entry
#: (2.9 ns at 100 x 100, 4.3 ns at 500 x 500, where they are bound by memory) and the CRT of a
#: result's (7.5 and 7.0 ns), measured on 127-bit limb arrays (``reconstruct_limbs``, ``limb_residues``).
#: Both the progress model and the split of those passes between workers use them: counted as
#: a few operations per entry instead, every pass up to 500 x 500 had run on one thread
#: (the CRT of a 500 x 500 127-bit product: 24 ms on one, 14 on two, back to back).
LIMB_RESIDUE = 200.0
LIMB_CRT = 400.0
#: The same per 16-bit piece of an entry and modulus, for the residues of Python ints
#: (:class:`~modlin._arith.residues.Pieces16`, the same weighted sums as ``limb_residues``' of
#: eight pieces), and LIMB_CRT for the CRT of ``matmul``'s results (the same kernel): counted as
#: a few operations per entry, they had run on one thread up to 400 x 400 (127 bits).
PIECE_RESIDUE = LIMB_RESIDUE / 8
#: The slabs of a :func:`~modlin.linalg._bigmod.limb_product` tile (each through its residues,
#: GEMMs and CRT) are never thinner than this many rows of the result: its passes, not its
#: GEMMs, are most of a small product's time, and they split well down to short slabs.
LIMB_SLAB_ROWS = 16


# Below this size the charpoly over Z (modlin.linalg._charpoly_z) takes the polynomial of each
# prime its Krylov sequence does not certify from a Hessenberg kernel, above from linalg.charpoly.
# Per 50-bit prime on the 2-core machine (ms, Hessenberg / block Krylov): n = 64: 1.7 / 31;
# 96: 5.3 / 11.5; 128: 12.9 / 17.7; 160: 24.3 / 24.0; 200: 48 / 36.
HESSENBERG_MAX_N = 160


# ---- Progress bars (modlin._runtime.progress) ----------------------------------------

#: Products expected to take less than this show no progress.
MIN_SECONDS = 2.0

#: The plain line is written again at most this often, in seconds (besides at its first
#: step, its new descriptions and its last step): a loop of thousands of small steps
#: would otherwise spend its time writing lines nobody can read.
REFRESH = 0.1
