"""What every provider worker shares: retries by error class, a token-bucket rate limit, key
rotation, error mapping, catalog prices and cost, the stream sink and the provider service.

The ``openai`` and ``anthropic`` workers are built from these modules; a new SDK needs only a
:class:`~tackroom.kit.providers.service.WireAdapter` (one attempt into a
:class:`~tackroom.kit.providers.sink.StreamSink`) and a profile model. Import from the
modules (``providers.service``, ``providers.errors``, ...): this package imports nothing, so
the command line can read :mod:`~tackroom.kit.providers.routing` cheaply. See
``docs/workers/providers.md``.
"""
