"""Researcher pages, one module per service: ``access`` (the researcher's home, asking for access and accepting the
data-use agreement; the study's access requests for its coordinators and ethics officers), ``links`` (files of
releases and datasets through signed links, the links issued, the download itself), ``archives`` (a whole release
or dataset as one ZIP), ``catalogue`` (browsing released episodes, a published release, its episodes in the viewer
shared with releases), ``datasets`` (one-dataset downloads) and ``withdrawals`` (withdrawing a demonstrator's
consent, and what each withdrawal reached). ``research/urls.py`` routes them; the pages under ``research/`` and
``downloads/`` are routed from ``portal/urls.py``."""
