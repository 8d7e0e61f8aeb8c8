"""The ``tackroom`` command line."""
