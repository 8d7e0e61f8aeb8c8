"""Backing off after a lost compare-and-set: :func:`tackroom.kit.cas.backoff`, as every
compare-and-set loop does."""

from __future__ import annotations

from tackroom.kit.cas import backoff

__all__ = ["backoff"]
