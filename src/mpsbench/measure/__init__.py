"""Measuring: devices, models, workloads, timing, guards."""
