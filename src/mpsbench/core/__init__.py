"""The torch-free foundations (docs/reference/layout.md); the standard library only, but for ``asvconf``, ``asv`` and
``asv_saving``, which import asv where it is used: ``mpsbench.measure`` runs inside asv's environments.
"""
