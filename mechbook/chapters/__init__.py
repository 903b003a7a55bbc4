"""One module per chapter (``chNN_<stem>.py`` for ``book/partK/NN_<stem>.ipynb``, ``intro.py``):
the chapter's configs per profile, the computations it shows, its chart builders and its computed prose."""
