"""pijit's benchmark runner and suite: `python -m benchmarks --help`; see benchmarks/README.md."""
