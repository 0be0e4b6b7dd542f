"""Recorded results: asv configurations derived from the suite's, and the append-only store."""
