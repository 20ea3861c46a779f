"""Fixity services, one module per job: ``runs`` (a fixity run: re-hash the stored objects each app's records
account for, find orphans, one slice at a time or the whole store) and ``alerts`` (a study's alerts: raised,
emailed, acknowledged and resolved with a note)."""
