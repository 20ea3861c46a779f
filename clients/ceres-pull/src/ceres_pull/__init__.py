"""``ceres-pull``: fetch a released episode set or a one-dataset download from a CERES portal and check it
against its signed manifest (``ceres_pull.pull``); the manifest format and the check of a folder
(``ceres_pull.manifest``), release keys pinned per portal (``ceres_pull.pinning``), and files written under one
folder without following links (``ceres_pull.safefs``)."""



def __getattr__(name: str) -> str:
    # looked up when asked for: importlib.metadata costs more to import than the manifest module needs
    if name != "__version__":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("ceres-pull")
    except PackageNotFoundError:  # run from a source tree that was not installed
        return "unknown"
