"""Arithmetic: modular reductions, moduli and primes, residues, the CRT, integer conversions
(Python ints, 16-bit pieces). Imports only the layers below: engines, runtime."""
