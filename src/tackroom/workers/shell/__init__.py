"""The ``shell`` worker: ``shell::run`` and ``code::python``, tools run by ``sandbox::run``."""
