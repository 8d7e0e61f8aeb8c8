"""The ``http`` worker: ``http::fetch`` behind an egress policy of its own."""
