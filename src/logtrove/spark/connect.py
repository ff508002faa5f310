"""Remote mode's connections to a broker: the source's planner and tasks and the writer
reach ``bootstrap`` with the same TLS / SASL settings (the ``security.*`` / ``sasl.*`` /
``ssl.*`` options, :func:`logtrove.spark.options.parse_security`).

Two clients use them: the project's own (:class:`~logtrove.client.KafkaClient`, the
tasks' raw fetches and the writer's produces), opened by :func:`open_client`, and
confluent-kafka (the planner's metadata and offsets), configured by
:func:`librdkafka_config`. A broker that cannot be used with the settings gives a
:class:`BrokerAccessError` naming the broker, the protocol and the reason (connection
refused, the certificate not verified, SASL authentication refused), at the first
connection: the planner checks it with :func:`open_client` before confluent-kafka, which
would only retry until its timeout.
"""

from __future__ import annotations

import ssl
from typing import Any

from logtrove.client import ClientConfigError, ClientSecurity, KafkaClient, KafkaProtocolError


class BrokerAccessError(ConnectionError):
    """The broker cannot be used with these settings (unreachable, TLS or SASL refused)."""


def _protocol(security: ClientSecurity | None) -> str:
    if security is None:
        return "PLAINTEXT"
    if security.protocol.sasl:
        return f"{security.protocol.value}, {security.mechanism} as {security.username}"
    return security.protocol.value


def open_client(
    bootstrap: str, security: ClientSecurity | None, *, client_id: str, timeout_s: float
) -> KafkaClient:
    """A connection to ``bootstrap``, under TLS and authenticated as ``security`` says;
    :class:`BrokerAccessError` when that fails."""
    where = f"broker {bootstrap} ({_protocol(security)})"
    try:
        return KafkaClient(bootstrap, timeout_s=timeout_s, client_id=client_id, security=security)
    except ClientConfigError as exc:
        raise BrokerAccessError(f"{where}: {exc}") from exc
    except ssl.SSLCertVerificationError as exc:
        raise BrokerAccessError(
            f"{where}: TLS: its certificate did not verify: {exc.verify_message} "
            "(ssl.ca.location must name the CA that signed it, and it must name the host)"
        ) from exc
    except KafkaProtocolError as exc:  # SASL refused: wrong user, password or mechanism
        raise BrokerAccessError(f"{where} refused us: {exc}") from exc
    except OSError as exc:  # refused, unreachable, or TLS refused (ssl.SSLError)
        raise BrokerAccessError(f"{where}: cannot connect: {exc}") from exc


def librdkafka_config(bootstrap: str, security: ClientSecurity | None) -> dict[str, Any]:
    """A confluent-kafka client's config for ``bootstrap`` with ``security``."""
    config: dict[str, Any] = {"bootstrap.servers": bootstrap}
    if security is not None:
        config |= security.properties()
    return config
