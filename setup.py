"""The one compiled part of the project; everything else is declared in pyproject.toml."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        # The journal's block parser (exporter/journal.py). Optional: where it cannot be compiled (no C
        # compiler), the install goes on and the journal is decoded by its other paths, with the same
        # result, more slowly.
        Extension("exporter._journal_block", ["exporter/_journal_block.c"], optional=True),
    ],
)
