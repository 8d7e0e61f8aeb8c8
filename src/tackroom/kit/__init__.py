"""Shared libraries that workers build on: not workers themselves, and no function ids of their own.

- :mod:`tackroom.kit.providers`: what every provider worker shares (retries, rate limit, keys,
  the stream sink, the provider service, routing a provider name to its worker);
- :mod:`tackroom.kit.rulesfile`: a hot-reloaded rules file (used by the policy workers);
- :mod:`tackroom.kit.hooks`: publishing to hook topics and subscribing to them.
- :mod:`tackroom.kit.quota`: rate limits and concurrency caps per tenant and user, counted in the
  engine's state (a gateway calls it before starting a run).
"""
