"""Where an episode sits in what the exporter and the portal write: its folder, ``episode-NNNNNN``, the same in
a shard's output folder, in the shards storage and in a release."""


def episode_folder(episode_index: int) -> str:
    return f"episode-{episode_index:06d}"
