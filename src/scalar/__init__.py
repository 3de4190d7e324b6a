"""Scalar: a GPU compute control plane.

The pure decision core lives in :mod:`scalar.domain`; everything else is a shell around it.
"""

__version__ = "0.1.0"
