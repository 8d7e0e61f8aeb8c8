"""The ``sandbox`` worker: commands run isolated by bubblewrap in a session's workspace.

- :mod:`.argv`: the ``bwrap`` and ``prlimit`` command lines (pure);
- :mod:`.host`, :mod:`.cgroups`: what the host offers (found once, by the first call), the
  per-call pids cgroup;
- :mod:`.execute`: one process to its end, output capped, timeout, nothing left behind;
- :mod:`.gate`: holding a command until it is in its cgroup;
- :mod:`.sandbox`: the levels, the probe, a call; :mod:`.worker`: the functions.
"""
