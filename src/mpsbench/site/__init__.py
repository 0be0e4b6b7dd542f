"""asv publish's site, made offline, with figures and a summary."""
