"""In-process benchmarks: run the stages in memory, in the order the workflow runs them."""
