"""Torch-free foundations: the standard library and asv."""
