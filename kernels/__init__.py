"""CUDA C++ sources of modlin's GPU kernels, shipped in the wheel as ``modlin.kernels``
and compiled at run time by ``cupy.RawModule`` (see ``modlin/_cuda.py``)."""
