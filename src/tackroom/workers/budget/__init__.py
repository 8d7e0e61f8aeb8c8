"""The ``budget`` worker: hierarchical LLM spend budgets (``budget::*``) that reserve before a
model call and settle after, by compare-and-set, so concurrent sessions cannot overspend."""
