"""Type aliases for modlin's public signatures."""

from __future__ import annotations

from typing import Any, Union

import numpy as np
import numpy.typing as npt

__all__ = ["ArrayLike", "IntegerArray"]

#: Anything :func:`modlin.matmul` accepts as an operand: NumPy arrays of
#: integers (or of integral floats), nested sequences, object arrays of Python
#: ints, galois ``FieldArray`` s and python-flint ``nmod_mat`` /
#: ``fmpz_mod_mat`` / ``fmpz_mat`` matrices.
ArrayLike = Union[npt.ArrayLike, Any]

#: An int64 result array.
IntegerArray = npt.NDArray[np.int64]
