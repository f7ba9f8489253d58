"""Dataset and protocol declarations, and loaders for config-driven runs."""
