"""The package's version, in a module of its own: the thin clients (``service``) compare it
with the running service's without importing anything else."""

__version__ = "0.8.0"
