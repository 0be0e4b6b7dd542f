"""Measuring: devices, models, workloads, the timing loop, guards and the benchmark families' logic."""
