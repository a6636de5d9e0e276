"""Engines: the GEMMs (float64, float32, int8; NumPy or CuPy), array namespaces, threads, numba
compilation and the raw CUDA bindings. Imports only :mod:`modlin._runtime`."""
