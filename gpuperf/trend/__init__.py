"""The trend site (``python -m gpuperf history page``) beside its templates and its vendored plotly: a static site of
every case's judged figure over the history's runs, and the lines ``summary.md`` takes from the same history. From
the pure parts up: ``paths`` (its file names), ``data`` (the model a page is written from), ``summary``,
``thumbnails`` and ``figures`` (the pictures), ``source`` (the model read from the history) and ``page`` (the
site written).

PYTEST_DONT_REWRITE
"""
