"""One benchmark run: preflight, the pytest child, its directory, identity and warmup."""
