"""Report renderers (Markdown); JSON reports are ``BenchmarkResult.to_dict``."""
