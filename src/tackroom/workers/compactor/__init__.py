"""The ``compactor`` worker: ``compaction::compact`` (see ``docs/workers/compactor.md``)."""
