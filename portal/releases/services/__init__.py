"""Release services, one module per job: requests, gate, approval, publish (the release job), manifest."""
