"""The ``traces`` worker: a trace store (see :mod:`tackroom.workers.traces.worker`)."""
