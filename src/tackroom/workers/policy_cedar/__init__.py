"""The ``policy-cedar`` worker: ``policy::check_permissions`` from Cedar policies."""
