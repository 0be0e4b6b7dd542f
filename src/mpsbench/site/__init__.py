"""The published site: asv publish's output made offline, with figures and a summary."""
