"""The Snakemake workflow vertebrae carries (the repository's ``Snakefile``, ``workflow/`` rules, profiles and envs),
found from a checkout or an installed wheel: :mod:`vertebrae.workflow.bundled`. Planning the workflow's jobs is
:mod:`vertebrae.planning`; the commands a user types are :mod:`vertebrae.cli`."""
