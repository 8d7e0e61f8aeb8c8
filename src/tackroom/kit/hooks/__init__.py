"""Hooks as a library: :mod:`~tackroom.kit.hooks.publish` (``HookSubscriptions``, for publishers)
and :mod:`~tackroom.kit.hooks.subscribe` (``hook`` / ``hook_worker``, for subscribers). Users
import them from :mod:`tackroom.hooks`."""
