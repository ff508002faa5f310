"""Moved to :mod:`logtrove.client`; these names stay importable from here for a while."""

from logtrove.client import ClientSecurity, KafkaClient, KafkaProtocolError, check, parse_bootstrap
from logtrove.wire import fetch_body

__all__ = ["ClientSecurity", "KafkaClient", "KafkaProtocolError", "check", "fetch_body", "parse_bootstrap"]
