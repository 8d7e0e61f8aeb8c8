"""What a namespace is made of on the server: its KV buckets and streams, as they are created."""

from __future__ import annotations

from nats.js import api

from tackroom.engine.nats.naming import Names, NatsOptions

__all__ = ["MAX_CONSUMERS", "bucket_configs", "stream_configs"]

MAX_CONSUMERS = 10_000
"""Consumers per stream (the server's default is 1000): queue lanes, subscribers, relays."""


def bucket_configs(names: Names, options: NatsOptions) -> list[api.KeyValueConfig]:
    """The namespace's KV buckets: state (with ``history``), the catalog (an entry outlives
    three missed heartbeats) and the namespace's own meta."""

    def bucket(name: str, *, history: int = 1, ttl: float | None = None) -> api.KeyValueConfig:
        return api.KeyValueConfig(
            bucket=name,
            history=history,
            ttl=ttl,
            storage=api.StorageType.FILE,
            replicas=options.replicas,
            direct=True,
        )

    return [
        bucket(names.state_bucket, history=options.history),
        bucket(names.catalog_bucket, ttl=3 * options.heartbeat),
        bucket(names.meta_bucket),
    ]


def stream_configs(names: Names, options: NatsOptions) -> list[api.StreamConfig]:
    """The namespace's queue stream (work-queue lanes) and its dead letters."""
    return [
        api.StreamConfig(
            name=names.queue_stream,
            subjects=[names.queue_subjects],
            retention=api.RetentionPolicy.WORK_QUEUE,
            storage=api.StorageType.FILE,
            duplicate_window=120.0,
            max_consumers=MAX_CONSUMERS,
            num_replicas=options.replicas,
        ),
        api.StreamConfig(
            name=names.dead_stream,
            subjects=[f"{names.ns}.dead.>"],
            retention=api.RetentionPolicy.LIMITS,
            storage=api.StorageType.FILE,
            allow_direct=True,
            num_replicas=options.replicas,
        ),
    ]
