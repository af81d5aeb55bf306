"""Bisection: the first bad FlagGems commit, or stack, of a range, judged by A/B campaigns."""
