"""Datasets declared in a workflow config (``dataset: {source: ..., identity: ...}``), per protocol: ``labelled``
(one labelled source: identity, row counts, rows), ``retrieval`` (the retrieval source types and their identities)
and ``sides`` (one query or gallery side of a ``source_pair``). The formats they read are :mod:`vertebrae.data.sources`."""
