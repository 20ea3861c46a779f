"""REST API of researcher access, one module per service (each action calls the same service function as the
pages; ``ceres-pull`` uses the release, dataset and link endpoints): ``access`` (a researcher's access requests,
``/api/access-requests/``; under ``/api/studies/<study_code>/``: the data-use agreement and its acceptance, the
access requests a study's coordinators and ethics officers decide), ``catalogue`` (published releases and their
episodes), ``datasets`` (one-dataset downloads), ``links`` (download links: what is issued, and the links issued)
and ``withdrawals`` (the consent events, whose withdrawals start here). ``portal/api_urls.py`` routes them."""
