"""Stage functions both faces call: the in-process benchmarks and the CLI (hence the workflow)."""
