"""The fleet: the nightly job's steps, the results branch, the machine check."""
