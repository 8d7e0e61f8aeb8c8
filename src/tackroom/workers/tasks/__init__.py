"""The ``tasks`` worker: declarative task graphs (see ``worker.py``)."""
