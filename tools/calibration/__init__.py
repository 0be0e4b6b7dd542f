"""Calibrating the suite on a GPU (scripts/calibrate): fidelity, noise, sensitivity, cost."""
