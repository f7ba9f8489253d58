"""What a user declares and where it is read from, in three rooms.

- The dataset classes, one module per protocol (this folder): ``labelled`` (``BenchmarkDataset``, with ``targets``
  and the ``constructors`` its convenience constructors use), ``retrieval`` (``RetrievalDataset``) with
  ``relevance`` (``RetrievalProtocol``: ids, relevance and exclusions), ``zero_shot`` (``ZeroShotDataset``).
- :mod:`vertebrae.data.sources`: one module per data format and the registry that maps a source's ``type:`` to its
  declaration and reader (plus the readers of relevance files, BEIR folders and precomputed embedding files).
- :mod:`vertebrae.data.declared`: datasets declared in a workflow config, per protocol.
"""
