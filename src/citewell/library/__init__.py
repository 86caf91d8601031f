"""A person's library: buckets of sources, and the ways to fill and search them.

``Library`` is the Python API that the CLI and the HTTP API mirror:

    >>> from citewell import Library, Settings
    >>> library = Library.open(Settings(data_dir="/tmp/citewell-demo"))
    >>> library.create_bucket("handbook")                                      # doctest: +SKIP
    >>> library.ingest_path("handbook.pdf", bucket="handbook")                 # doctest: +SKIP
    >>> library.search(SearchRequest(query="torque limits", bucket_ids=("handbook",)))  # +SKIP

``library.py`` is the class; ``checks.py`` what it refuses and how it cleans what clients send;
``archives.py`` a bucket exported to one file and imported back.
"""

from citewell.library.library import FILE_ID_KEY, LOCAL, Library, copy_to_postgres

__all__ = ["FILE_ID_KEY", "LOCAL", "Library", "copy_to_postgres"]
