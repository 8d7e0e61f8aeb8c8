"""The gateway API contract suite against the ``gateway`` worker this package ships (booted as
``tackroom serve`` boots it, with the scripted model)."""

from __future__ import annotations

from tackroom.testing.contracts.gateway import GatewayApiContract


class TestShippedGateway(GatewayApiContract):
    pass
