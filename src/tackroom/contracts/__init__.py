"""Contracts: what crosses a worker wall, one module per job.

``messages``, ``provider`` and ``tools`` are shared by every worker; ``sessions``, ``turn``,
``approvals``, ``policy``, ``budget``, ``catalog``, ``credentials``, ``directory``, ``hooks``,
``files`` and ``utilities`` are the function ids, payload models and error codes of one job each,
whichever worker serves it. A worker imports contracts only, never another worker; a contract
module imports only pydantic, the standard library, other contracts and
``tackroom.engine.protocol``.
"""
