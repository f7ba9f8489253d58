"""Scorers: pure functions of embeddings and targets, no I/O."""
