"""Measuring: devices, models, workloads, timing."""
