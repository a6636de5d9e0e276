"""The ``modlin bench`` tables, one module per section: :mod:`.products` (multiword, RNS,
Gaussian and linalg against dgemm, python-flint and galois), :mod:`.ozaki_tables`,
:mod:`.dask_tables`, :mod:`.scale` (big products under memory budgets) and :mod:`.busy`
(a core held by another process)."""
