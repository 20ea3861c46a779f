"""CERES exporter: capture source -> LeRobotDataset v3 episode shard.

A plain Python library (no Django). The portal calls it; so does its command line,
``python -m exporter``.
"""

__version__ = "0.1.0"
