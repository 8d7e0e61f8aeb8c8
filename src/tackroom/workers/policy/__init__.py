"""The ``policy`` worker: ``policy::check_permissions`` from a hot-reloaded ``permissions.yaml``."""
