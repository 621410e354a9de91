"""Executed documentation: README.md's and docs/*.md's console blocks and Python examples."""
