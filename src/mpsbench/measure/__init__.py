"""Measuring: devices, models, workloads, timing and guards."""
