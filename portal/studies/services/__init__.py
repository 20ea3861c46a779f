"""The study registry's services: the only place where studies and their registry change state, one module
per job: ``study`` (status, audio policy, data-use agreement), ``approval_policy`` (how many ethics officers
approve a release: theirs to decide), ``headsets``, ``demonstrators`` and
``consent`` (documents, events, coverage); ``registry_change`` holds what each registry change shares (a
signed-in actor, today's date, a study open for registry entries).

Views, forms, the API, the admin, management commands and tasks call these functions, so each rule lives
in one place. Every change is recorded with ``audit.record`` inside the same transaction. Each function
enters the study scope itself, so callers outside a request (ingest, tasks, scripts) need no scope of their
own.
"""
