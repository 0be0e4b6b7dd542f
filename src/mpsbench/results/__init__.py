"""Recorded results: read, recorded and merged, append-only."""
