"""Calibrating the suite on a GPU: fidelity, noise, sensitivity (a deliberate slowdown) and cost."""
