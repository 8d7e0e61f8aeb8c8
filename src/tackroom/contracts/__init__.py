"""Contracts: what crosses a worker wall, one module per job.

``bus`` defines the descriptors — ``Function`` (an id with its request and response types),
``Tool`` (a function offered to models, with its traits), ``Scope`` (shared state and its value
model) and ``Stream`` (events and their type). ``messages``, ``provider``, ``tools`` and
``events`` are shared by every worker; ``sessions``, ``turn``, ``approvals``, ``policy``,
``budget``, ``catalog``, ``credentials``, ``directory``, ``hooks``, ``files``, ``utilities`` and
``engine`` declare the descriptors, payload models and error codes of one job each, whichever
worker serves it: the worker serves a descriptor (``ctx.serve``), a caller imports it
(``await DESCRIPTOR.call(bus, Request(...))``); ``endpoint``'s are answered by a local endpoint
itself. A worker imports contracts only, never another
worker; a contract module imports only pydantic, the standard library, other contracts and
``tackroom.engine.protocol``.
"""
