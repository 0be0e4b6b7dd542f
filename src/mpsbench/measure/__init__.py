"""Measuring: devices, models, workloads, timing, guards and the benchmark families' logic."""
