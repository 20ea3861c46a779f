"""Researcher access, one module per job: ``access`` (agreements, access requests, grants, the live check),
``catalogue`` (released episodes and whether they may still be given out), ``links`` (signed download links),
``datasets`` (one-dataset downloads and their build), ``withdrawals`` (a consent withdrawal: ``withdraw_consent``
records it through the registry, purges raw audio and opens the job; ``apply_withdrawal``, the job, reaches the
releases, one-dataset downloads and researchers, and leaves tombstones and notices)."""
