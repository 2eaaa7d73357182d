"""Compiler internals of mscclpp.language: operation records, resource tables and passes."""
