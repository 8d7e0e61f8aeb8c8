"""The ``files`` worker: read, write and list files in a per-session workspace."""
