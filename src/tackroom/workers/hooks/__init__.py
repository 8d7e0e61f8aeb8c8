"""The ``hooks`` worker: hook fan-out (``hook-fanout::*``) with gates, transforms and observers.
``HookSubscriptions`` for publishers and ``hook`` / ``hook_worker`` for subscribers live in
:mod:`tackroom.kit.hooks` (re-exported by :mod:`tackroom.hooks`)."""
