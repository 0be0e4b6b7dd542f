"""mpsbench: asv benchmarks of PyTorch training and inference on mps, cuda and cpu."""

__version__ = "0.1.0"

# Every module imports with any of these; features a release lacks are guarded where used.
SUPPORTED_TORCH = ">=1.12,<3"
