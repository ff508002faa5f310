"""Moved to :mod:`logtrove.client.security`; these names stay importable from here for a while."""

from logtrove.client.security import ClientConfigError, ClientSecurity

__all__ = ["ClientConfigError", "ClientSecurity"]
