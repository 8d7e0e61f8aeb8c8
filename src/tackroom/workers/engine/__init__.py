"""The ``engine`` worker: the engine's capabilities (``state::*``, ``stream::*``,
``engine::functions::list`` ...) as function ids on the bus."""
