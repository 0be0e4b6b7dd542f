"""The regression loop: the one factor, statistics, compare, bisect and alerts."""
