"""The book's machinery, one module per job (``python -m mechbook execute|build|check|spread``).

- :mod:`~mechbook.book.toc`: the chapters ``_toc.yml`` lists, and choosing some of them.
- :mod:`~mechbook.book.environment`: the environment the kernels get (absolute paths, the
  profile) and the part of it that decides results (data digests, library versions).
- :mod:`~mechbook.book.run`: papermill runs of the chapters, cached by what decides them, with
  failure reports that name the code cell.
- :mod:`~mechbook.book.relay`: a chapter's progress bars relayed to the console while it runs.
- :mod:`~mechbook.book.costs`: measured seconds per chapter and profile, for the ETA.
- :mod:`~mechbook.book.calibrate`: this machine's speed against the one that measured the costs.
- :mod:`~mechbook.book.pages`: what each page says it costs, under its profile line.
- :mod:`~mechbook.book.site`: staging the executed chapters and building the HTML site.
- :mod:`~mechbook.book.checks`: records against ``book/thresholds/<stem>.yml``.
- :mod:`~mechbook.book.spread`: records over several seeds, kept beside the thresholds.
"""
