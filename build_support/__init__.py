"""Helpers of setup.py (not installed with the package)."""
