"""The harness workers, one package each: contracts.py (the public face) and worker.py."""
