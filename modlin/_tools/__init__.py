"""Tools beside the library: the ``modlin`` command (:mod:`.cli`), ``modlin warmup``
(:mod:`.warmup`) and the ``modlin bench`` tables (:mod:`.bench`).

They use the library as a user would, through its public functions and a few of its
private pieces; nothing in the library imports them (``tests/test_layers.py`` checks it),
as FLINT keeps its profiles and galois its benchmarks beside the package.
"""
