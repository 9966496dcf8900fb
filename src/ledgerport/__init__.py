"""ledgerport: the partner platform of a multi-business bookkeeping service."""

__version__ = "0.1.0"
