"""Runtime: limits (:func:`modlin.limits`), progress, scratch memory and the calibration of
every tuning constant. Imports nothing else of modlin."""
