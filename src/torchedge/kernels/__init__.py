"""Kernel libraries for the NumPy runtime (no torch)."""
