"""The NATS JetStream backend: ``open_engine("nats://host:port[,host:port]?namespace=NAME")``.

Needs the ``nats`` extra (``pip install 'tackroom[nats]'``). The mapping onto NATS, the
per-group ordering design and reconnect behaviour are described in ``docs/nats.md``.
"""

from __future__ import annotations

from tackroom.engine.nats.engine import NatsEngine
from tackroom.engine.nats.naming import NatsOptions, parse_nats_url

__all__ = ["NatsEngine", "NatsOptions", "parse_nats_url"]
