"""PyTorch builds: the manifest, resolving and installing wheels, the timeline asv walks."""
