"""Contracts shared by every worker: messages, the provider stream, the tool-call context.

A worker imports other workers' ``contracts`` only; these are the ones every worker shares.
"""
