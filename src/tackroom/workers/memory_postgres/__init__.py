"""The ``memory-postgres`` worker: long-term memory on PostgreSQL full-text search."""
