"""tackroom's version: read by the build (``[tool.hatch.version]``) and by the worker catalog,
which announces it for every built-in worker without loading package metadata."""

__version__ = "0.1.0.dev0"
