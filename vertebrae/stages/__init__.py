"""Stage functions both faces call (the in-process benchmarks and the CLI, hence the workflow), and the jobs behind
the CLI: ``common`` and one module per protocol (``labelled``, ``retrieval``, ``zero_shot``) hold the stages;
``plan`` checks job specs; ``jobs`` holds the shared endpoint jobs and one ``*_jobs`` module per protocol the rest."""
