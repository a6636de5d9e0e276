"""Algorithms: the tile driver, multiword and RNS products, Ozaki-II stages, and the GPU's
stage tables. Imports planning and the layers below it."""
