"""The ``memory`` worker: long-term memory in SQLite with FTS5 (see :mod:`.worker`)."""
