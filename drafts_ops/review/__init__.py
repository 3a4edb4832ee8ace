"""Candidate review in the browser (``drafts review``): the candidates of finished searches
and surveys, their detail images from the stored cutouts, and people's labels.

| module | what |
|---|---|
| :mod:`~drafts_ops.review.catalogue` | the candidates under the given directories, with ids |
| :mod:`~drafts_ops.review.labels` | ``labels.csv``: labels written atomically under a lock |
| :mod:`~drafts_ops.review.images` | a candidate's detail image with the chosen averaging |
| :mod:`~drafts_ops.review.page` | the self-contained review page |
| :mod:`~drafts_ops.review.server` | the local web server (standard library) |
"""
