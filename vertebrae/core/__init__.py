"""Core contracts: errors, canonical JSON and fingerprints, dataset identity, labels, artifacts."""
