"""Remote mode against a broker with SASL and TLS listeners (the one of the broker
security tests: certificates from ``logtrove certs``, user ``alice``): the source reads
and the writer produces with librdkafka's property names as options (SCRAM-SHA-512 over
SASL_SSL, PLAIN over SASL_PLAINTEXT, a client certificate over SSL, or a
``clientConfig`` file), the rows those of a direct read; a wrong password or an
untrusted CA stops the read and the write with the reason, never the password."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from tests.broker.secured import PASSWORD, Secured

from logtrove.cli.certs import make_certificates
from logtrove.spark.options import OptionError, ReadOptions
from logtrove.spark.writer import WriteOptions

WRONG = "not-alices-password"
TOPIC = "spark-secured"
COLUMNS = ["partition", "offset", "key", "value", "timestamp", "id", "tag"]


@pytest.fixture(scope="module")
def topic(secured: Secured) -> str:
    """``TOPIC`` with 300 records over 2 partitions, produced over PLAINTEXT."""
    bootstrap = secured.broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(TOPIC, 2, 1), NewTopic("spark-secured-sink", 2, 1)]).values():
        future.result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(300):
        producer.produce(TOPIC, key=b"k%d" % (i % 7), value=b"value %d" % i, headers=[("id", b"m-%d" % i)])
    assert producer.flush(30) == 0
    return TOPIC


def _scram(secured: Secured, password: str = PASSWORD) -> dict[str, str]:
    return {
        "bootstrap": f"127.0.0.1:{secured.sasl_ssl}",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "alice",
        "sasl.password": password,
        "ssl.ca.location": str(secured.certs / "ca.pem"),
    }


def _plain(secured: Secured) -> dict[str, str]:
    return {
        "kafka.bootstrap.servers": f"127.0.0.1:{secured.sasl_plain}",
        "kafka.security.protocol": "SASL_PLAINTEXT",
        "kafka.sasl.mechanism": "PLAIN",
        "kafka.sasl.username": "alice",
        "kafka.sasl.password": PASSWORD,
    }


def _mtls(secured: Secured) -> dict[str, str]:
    return {
        "bootstrap": f"127.0.0.1:{secured.ssl}",
        "security.protocol": "SSL",
        "ssl.ca.location": str(secured.certs / "ca.pem"),
        "ssl.certificate.location": str(secured.certs / "app-one.pem"),
        "ssl.key.location": str(secured.certs / "app-one.key"),
    }


def _rows(df: Any) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in df.select(*COLUMNS).collect())


def _read(spark: Any, options: dict[str, str], **extra: str) -> Any:
    return spark.read.format("logtrove").options(subscribe=TOPIC, **options, **extra).load()


@pytest.mark.parametrize(
    "how", [_scram, _plain, _mtls], ids=["scram-sasl-ssl", "plain-sasl-plaintext", "mtls"]
)
def test_secured_remote_reads_equal_direct_reads(spark: Any, secured: Secured, topic: str, how: Any) -> None:
    direct = _rows(_read(spark, {"path": str(secured.data)}))
    assert len(direct) == 300
    assert _rows(_read(spark, how(secured))) == direct
    assert _rows(_read(spark, how(secured), key="k3")) == [r for r in direct if r[2] == b"k3"]


def test_a_client_config_file_holds_the_settings(
    spark: Any, secured: Secured, topic: str, tmp_path: Path
) -> None:
    settings = _scram(secured)
    bootstrap = settings.pop("bootstrap")
    config = tmp_path / "client.properties"
    config.write_text("".join(f"{name}={value}\n" for name, value in settings.items()))
    remote = _read(spark, {"bootstrap": bootstrap, "clientConfig": str(config)})
    assert _rows(remote) == _rows(_read(spark, {"path": str(secured.data)}))


def test_the_writer_produces_through_a_secured_listener(spark: Any, secured: Secured, topic: str) -> None:
    df = spark.createDataFrame([(f"k{i}", f"v{i}") for i in range(120)], "key string, value string")
    df.write.format("logtrove").options(**_scram(secured), topic="spark-secured-sink").mode("append").save()
    back = (
        spark.read.format("logtrove").options(path=str(secured.data), subscribe="spark-secured-sink").load()
    )
    assert sorted((bytes(r.key).decode(), bytes(r.value).decode()) for r in back.collect()) == sorted(
        (f"k{i}", f"v{i}") for i in range(120)
    )


def test_a_wrong_password_stops_reads_and_writes_with_the_reason(
    spark: Any, secured: Secured, topic: str
) -> None:
    with pytest.raises(Exception, match="refused us: SASL authentication") as read:
        _read(spark, _scram(secured, WRONG)).count()
    df = spark.createDataFrame([("v",)], "value string")
    with pytest.raises(Exception, match="refused us: SASL authentication") as write:
        df.write.format("logtrove").options(**_scram(secured, WRONG), topic="spark-secured-sink").mode(
            "append"
        ).save()
    for failure in (read, write):
        assert "SCRAM-SHA-512 as alice" in str(failure.value)
        assert WRONG not in str(failure.value)


def test_an_untrusted_broker_certificate_stops_the_read(
    spark: Any, secured: Secured, topic: str, tmp_path: Path
) -> None:
    other = tmp_path / "other"
    make_certificates(other, ["127.0.0.1"], [], 1)
    options = {**_scram(secured), "ssl.ca.location": str(other / "ca.pem")}
    with pytest.raises(Exception, match="certificate did not verify"):
        _read(spark, options).count()


def test_security_options_that_cannot_be_are_refused_when_parsed(tmp_path: Path) -> None:
    base = {"bootstrap": "127.0.0.1:9092", "subscribe": "t"}
    cases = [
        (
            {"security.protocol": "SASL_SSL", "sasl.username": "alice"},
            "needs sasl.username and sasl.password",
        ),
        ({"security.protocol": "TLS"}, "unknown security.protocol"),
        ({"sasl.mechanism": "GSSAPI", "security.protocol": "SASL_SSL"}, "sasl.mechanism must be one of"),
        ({"clientConfig": str(tmp_path / "missing.properties")}, "cannot read"),
        ({"clientConfig": "x", "security.protocol": "SSL"}, "not both"),
    ]
    for options, message in cases:
        with pytest.raises(OptionError, match=message):
            ReadOptions.parse({**base, **options})
        with pytest.raises(OptionError, match=message):
            WriteOptions.parse({**base, **options})
    with pytest.raises(OptionError, match="for remote mode"):
        ReadOptions.parse({"path": "./data", "subscribe": "t", "security.protocol": "SSL"})
    parsed = ReadOptions.parse({**base, "kafka.security.protocol": "ssl", "ssl.ca.location": "/ca.pem"})
    assert parsed.security is not None and parsed.security.properties() == {
        "security.protocol": "SSL",
        "ssl.ca.location": "/ca.pem",
    }
    assert ReadOptions.parse(base).security is None


def test_sql_and_export_reach_a_secured_broker_with_the_clis_client_config(
    spark: Any, secured: Secured, topic: str, tmp_path: Path
) -> None:
    """``logtrove sql`` / ``export --bootstrap`` pass LOGTROVE_CLIENT_CONFIG's file on as
    the source's ``clientConfig``: the views list the topics and read them over SASL_SSL."""
    from logtrove.spark.connect import BrokerAccessError
    from logtrove.spark.export import ExportSpec
    from logtrove.spark.sql import register_topics, run_sql

    settings = _scram(secured)
    bootstrap = settings.pop("bootstrap")
    config = tmp_path / "client.properties"
    config.write_text("".join(f"{name}={value}\n" for name, value in settings.items()))
    views = register_topics(spark, bootstrap=bootstrap, client_config=str(config))
    assert views["spark_secured"] == TOPIC
    _, rows = run_sql(spark, "SELECT count(*), count(DISTINCT key) FROM spark_secured", 10)
    assert [tuple(r) for r in rows] == [(300, 7)]
    spec = ExportSpec(TOPIC, tmp_path / "t", bootstrap=bootstrap, client_config=str(config))
    exported = spark.read.format("logtrove").options(**spec.source_options()).load()
    assert _rows(exported) == _rows(_read(spark, {"path": str(secured.data)}))
    with pytest.raises(BrokerAccessError, match="alice"):
        wrong = tmp_path / "wrong.properties"
        wrong.write_text(config.read_text().replace(PASSWORD, WRONG))
        register_topics(spark, bootstrap=bootstrap, client_config=str(wrong))
