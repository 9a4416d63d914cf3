"""trio-agent benchmarks: every number is a ratio against a floor measured in the same run."""
