"""The ``agents`` worker: agent definitions offered as ``agent::<name>`` and ``handoff::<name>``."""
