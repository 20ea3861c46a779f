"""Where an episode sits in what the exporter and the portal write: its folder, ``episode-NNNNNN``, the same in
a shard's output folder, in the shards storage and in a release."""

from ceres_pull.manifest import episode_folder  # noqa: F401  (one definition, shared with the client)
