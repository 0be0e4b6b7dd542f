"""The published site: asv publish's output made offline, the figures and summary, link rewriting."""
