"""mpsbench: asv benchmarks of PyTorch training and inference on mps, cuda and cpu."""

__version__ = "0.1.0"
