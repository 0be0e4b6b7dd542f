"""The torch-free foundations, standard library only except asv, imported where used
(``mpsbench.measure`` runs inside asv's environments).
"""
