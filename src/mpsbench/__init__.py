"""mpsbench: asv benchmarks of PyTorch training and inference on mps, cuda and cpu."""

__version__ = "0.1.0"

# The torch releases the suite is written for. Every module imports with any of
# them; features a release lacks (torch.mps before 2.0) are guarded where used.
SUPPORTED_TORCH = ">=1.12,<3"
