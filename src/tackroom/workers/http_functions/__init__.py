"""The ``http-functions`` worker: functions served by HTTP endpoints in any language."""
