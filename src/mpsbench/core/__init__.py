"""The torch-free foundations every other layer stands on (README, "Layout").

``errors``, ``progress``, ``settings``, ``text``, ``files`` and ``git`` are standard-library only: ``mpsbench.measure`` runs
inside asv's environments, which hold the build and little else. ``asvconf`` and ``asv`` read and drive asv, which
the suite's own environment holds; they import it where it is used.
"""
