"""A small FlagGems-compatible benchmark suite of torch CPU operators."""
