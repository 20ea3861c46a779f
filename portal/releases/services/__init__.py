"""Release services, one module per job: release_requests (draft, submit, reject), gate, approval, publish (the
release job), manifest."""
