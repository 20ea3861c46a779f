"""Researcher access, one module per job: ``access`` (agreements, access requests, grants, the live check),
``catalogue`` (released episodes and whether they may still be given out), ``links`` (signed download links),
``datasets`` (one-dataset downloads and their build)."""
