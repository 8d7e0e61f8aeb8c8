"""The ``audit`` worker: a hash-chained audit log (see :mod:`tackroom.workers.audit.worker`)."""
