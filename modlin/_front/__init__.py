"""Front doors: input checks and interop (galois, python-flint), the dask front ends, and the
doors of :func:`modlin.matmul` and :func:`modlin.intmul`. Imports algorithms and the layers
below it."""
