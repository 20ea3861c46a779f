"""The compiled parts of the project; everything else is declared in pyproject.toml."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        # The journal's block parser (exporter/journal.py). Optional: where it cannot be compiled (no C
        # compiler), the install goes on and the journal is decoded by its other paths, with the same
        # result, more slowly.
        Extension("exporter._journal_block", ["exporter/_journal_block.c"], optional=True),
        # The exact statistics' order statistics and moments (exporter/stats.py). Optional as well: numpy
        # computes them where it was not built, with the same figures, more slowly. Its sums must round as
        # numpy's do: no fused multiply-add.
        Extension("exporter._block_stats", ["exporter/_block_stats.c"], optional=True,
                  extra_compile_args=["-ffp-contract=off"]),
    ],
)
