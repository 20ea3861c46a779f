"""Release services, one module per job: ``release_requests`` (draft, submit, reject, reverify; ``set_state``, the
one place a request changes state), ``gate`` (the checklist and the shard inspection), ``approval`` (four eyes),
``publish`` (the release job), ``manifest`` (the manifest's section, its checks against what was approved, signing),
``review`` (what the viewer shows of an episode), ``supersede`` (the release that follows a consent withdrawal,
and the open requests it rejects)."""
