"""The ``modlin bench`` tables, one module per section: :mod:`.products` (multiword, RNS,
Gaussian and linalg against dgemm, python-flint and galois), :mod:`.ozaki_tables`,
:mod:`.dask_tables`, :mod:`.scale` (big products under memory budgets) and :mod:`.busy`
(a core held by another process)."""

import sys


class _Std:
    """``sys.stdout`` or ``sys.stderr`` as it is at each write: the tables' default ``out``
    and ``progress``. A default bound at import (``out=sys.stdout``) kept the stream of the
    import, so that a caller who replaced ``sys.stdout`` later (pytest's ``capsys``, a
    notebook's or a script's redirect) did not get the table."""

    def __init__(self, name: str) -> None:
        self.name = name

    def write(self, text: str) -> int:
        return getattr(sys, self.name).write(text)

    def flush(self) -> None:
        getattr(sys, self.name).flush()


#: The defaults of every table's ``out`` and ``progress`` (:class:`_Std`).
STDOUT, STDERR = _Std("stdout"), _Std("stderr")
