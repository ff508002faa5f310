"""The JSON API over a live server and real data: every area, answers checked against
what was written, errors as RFC 7807 problems."""

from __future__ import annotations

import base64
import json

import httpx
import pytest
from tests.http.support import BASE_TS, GROUP, ORDERS_PER_PARTITION, TAGGED_GROUP, Dataset, assert_problem


def test_health_reports_version_and_writability(client: httpx.Client, dataset: Dataset) -> None:
    body = client.get("/api/v1/health").json()
    assert body["status"] == "ok"
    assert body["read_only"] is False
    assert body["data_dir"] == str(dataset.path)
    assert body["topics"] >= 3


def test_topics_list_hides_internal_topics_unless_asked(client: httpx.Client) -> None:
    names = [t["name"] for t in client.get("/api/v1/topics").json()]
    assert {"orders", "users", "binary"} <= set(names)
    assert "__consumer_offsets" not in names
    with_internal = client.get("/api/v1/topics", params={"internal": "true"}).json()
    assert "__consumer_offsets" in [t["name"] for t in with_internal]
    orders = next(t for t in with_internal if t["name"] == "orders")
    assert orders["partitions"] == 3
    assert orders["messages"] == 3 * ORDERS_PER_PARTITION


def test_describe_topic_shows_configs_partitions_and_sizes(client: httpx.Client) -> None:
    body = client.get("/api/v1/topics/orders").json()
    assert body["partitions"] == 3
    assert body["overrides"] == {"segment.bytes": "8192", "index.headers": "trace"}
    configs = {c["name"]: c for c in body["configs"]}
    assert configs["segment.bytes"]["source"] == "topic"
    assert configs["retention.ms"]["source"] == "default"
    assert body["retention_ms"] == int(configs["retention.ms"]["value"])
    parts = body["partition_list"]
    assert [p["log_end_offset"] for p in parts] == [ORDERS_PER_PARTITION] * 3
    assert all(p["segments"] > 1 for p in parts), "segment.bytes=8192 rolls several segments"
    assert body["size_bytes"] == sum(p["size_bytes"] for p in parts)


def test_partition_detail_lists_segments_in_order(client: httpx.Client) -> None:
    body = client.get("/api/v1/topics/orders/partitions/1").json()
    segments = body["segments_detail"]
    assert segments[0]["base_offset"] == 0
    assert [s["next_offset"] for s in segments[:-1]] == [s["base_offset"] for s in segments[1:]]
    assert segments[-1]["active"] and not segments[0]["active"]
    assert segments[-1]["next_offset"] == body["log_end_offset"] == ORDERS_PER_PARTITION
    assert sum(s["size_bytes"] for s in segments) == body["size_bytes"]
    assert segments[0]["file"] == "00000000000000000000.log"
    assert body["indexed_offset"] is None  # no indexer has run over this data directory


def test_message_by_offset_matches_what_was_written(client: httpx.Client, dataset: Dataset) -> None:
    written = dataset.orders[2][123]
    body = client.get("/api/v1/topics/orders/partitions/2/offsets/123").json()
    assert body["offset"] == 123 and body["partition"] == 2
    assert body["key"] == written.key.decode()
    assert body["value"] == written.value.decode()
    assert body["timestamp"] == written.timestamp
    assert [(h["name"], h["value"]) for h in body["headers"]] == [(n, v.decode()) for n, v in written.headers]
    assert body["client_id"] == "msg-2123"


def test_binary_keys_values_and_headers_come_as_base64(client: httpx.Client) -> None:
    body = client.get("/api/v1/topics/binary/partitions/0/offsets/0").json()
    assert body["key"] is None and base64.b64decode(body["key_b64"]) == b"\x80k"
    assert body["value"] is None and base64.b64decode(body["value_b64"]) == b"\xff\xfe\x00"
    assert body["headers"] == [{"name": "h", "value": None, "value_b64": base64.b64encode(b"\xff").decode()}]


def test_offset_past_the_end_is_a_problem_with_the_log_bounds(client: httpx.Client) -> None:
    body = assert_problem(
        client.get("/api/v1/topics/orders/partitions/0/offsets/5000"), 422, "offset-out-of-range"
    )
    assert body["log_start_offset"] == 0 and body["log_end_offset"] == ORDERS_PER_PARTITION
    assert "[0, 299]" in str(body["detail"])


def test_neighbours_surround_the_offset(client: httpx.Client) -> None:
    body = client.get(
        "/api/v1/topics/orders/partitions/0/offsets/10/neighbours", params={"before": 3, "after": 2}
    ).json()
    assert [m["offset"] for m in body["messages"]] == [7, 8, 9, 10, 11, 12]
    start = client.get("/api/v1/topics/orders/partitions/0/offsets/1/neighbours").json()
    assert [m["offset"] for m in start["messages"]] == list(range(7))


def test_browse_pages_through_a_partition_with_a_cursor(client: httpx.Client) -> None:
    seen: list[int] = []
    params: dict[str, object] = {"limit": 128}
    for _ in range(10):
        page = client.get("/api/v1/topics/orders/partitions/1/messages", params=params).json()
        seen += [m["offset"] for m in page["messages"]]
        if page["next_cursor"] is None:
            assert page["reason"] == "range exhausted"
            break
        assert page["reason"] == "limit reached"
        params["offset"] = int(page["next_cursor"])
    assert seen == list(range(ORDERS_PER_PARTITION))
    assert page["cli"].startswith("logtrove query orders --partition 1 --offset 256 --data ")


def test_at_time_gives_each_partitions_first_message_at_or_after(
    client: httpx.Client, dataset: Dataset
) -> None:
    when = BASE_TS + 1_150_000  # partition 1 holds n = 1000..1299, so its offset ~150
    iso = "2026-01-01T00:19:10Z"
    for time in (str(when), iso):
        body = client.get("/api/v1/topics/orders/messages/at", params={"time": time}).json()
        got = {m["partition"]: m for m in body["messages"]}
        assert 0 not in got  # partition 0's newest record is older than that
        for p, msg in got.items():
            expected = next(
                i for i, r in enumerate(dataset.orders[p]) if r.timestamp is not None and r.timestamp >= when
            )
            assert msg["offset"] == expected
    assert_problem(
        client.get("/api/v1/topics/orders/messages/at", params={"time": "soon"}), 422, "invalid-time"
    )


# Every parameter that takes a time, on every route: "²" passes str.isdigit() but not
# int(), "٣" passes both; neither is a time, and each must be a 422 naming the parameter.
TIME_ROUTES = [
    ("/api/v1/topics/orders/messages/at", "time", {}),
    ("/api/v1/topics/orders/messages/range", "from", {}),
    ("/api/v1/topics/orders/messages/range", "to", {}),
    ("/api/v1/topics/orders/messages/by-key", "from", {"key": "user-1"}),
    ("/api/v1/topics/orders/messages/by-header", "to", {"name": "trace", "value": "tr-1"}),
    ("/api/v1/topics/orders/histogram", "from", {}),
    ("/api/v1/topics/orders/histogram", "to", {}),
    ("/api/v1/groups/g/lag-history", "from", {}),
]


@pytest.mark.parametrize(("path", "name", "params"), TIME_ROUTES)
@pytest.mark.parametrize("text", ["²", "1²", "٣", "-²", "２０２６-01-01"])
def test_a_time_in_other_digits_is_a_422_naming_the_parameter(
    client: httpx.Client, path: str, name: str, params: dict[str, str], text: str
) -> None:
    body = assert_problem(client.get(path, params={**params, name: text}), 422, "invalid-time")
    assert f"{name}={text!r}" in str(body["detail"]) and "ISO-8601" in str(body["detail"])


def test_unknown_topic_and_partition_are_404_problems(client: httpx.Client) -> None:
    assert_problem(client.get("/api/v1/topics/nope"), 404, "unknown-topic")
    assert_problem(client.get("/api/v1/topics/orders/partitions/7"), 404, "unknown-partition")
    assert_problem(client.get("/api/v1/no/such/path"), 404, "not-found")


def test_invalid_parameters_are_422_problems_naming_the_field(client: httpx.Client) -> None:
    body = assert_problem(
        client.get("/api/v1/topics/orders/partitions/0/messages", params={"limit": 0}), 422, "validation"
    )
    assert "limit" in str(body["detail"])
    assert_problem(client.get("/api/v1/topics/bad name!"), 422, "validation")
    assert_problem(client.get("/api/v1/topics/orders/partitions/-1"), 422, "validation")
    assert_problem(client.post("/api/v1/topics", content=b"{not json"), 422, "validation")
    assert_problem(client.delete("/api/v1/topics"), 405, "method-not-allowed")


def test_create_topic_then_alter_its_configs(client: httpx.Client) -> None:
    created = client.post(
        "/api/v1/topics",
        json={"name": "created-by-api", "partitions": 2, "configs": {"retention.ms": "1000"}},
    )
    assert created.status_code == 201 and created.headers["location"] == "/api/v1/topics/created-by-api"
    assert created.json()["retention_ms"] == 1000
    assert_problem(client.post("/api/v1/topics", json={"name": "created-by-api"}), 409, "topic-exists")
    assert_problem(
        client.post("/api/v1/topics", json={"name": "x", "configs": {"retention.ms": "soon"}}),
        422,
        "invalid-config",
    )
    altered = client.patch(
        "/api/v1/topics/created-by-api/configs",
        json={"set": {"cleanup.policy": "compact"}, "delete": ["retention.ms"]},
    )
    configs = {c["name"]: c for c in altered.json()}
    assert configs["cleanup.policy"]["value"] == "compact" and configs["cleanup.policy"]["source"] == "topic"
    assert configs["retention.ms"]["source"] == "default"
    assert_problem(
        client.patch("/api/v1/topics/created-by-api/configs", json={"set": {"no.such": "1"}}),
        422,
        "invalid-config",
    )


def test_produce_partitions_like_kafka_and_returns_offsets_in_input_order(client: httpx.Client) -> None:
    client.post("/api/v1/topics", json={"name": "produced", "partitions": 4})
    records = [
        {"key": "k1", "value": {"n": 1}, "headers": {"id": "p-1"}, "timestamp": BASE_TS},
        {"key": "k1", "value": "two"},
        {"value": "explicit", "partition": 3, "headers": [["a", "1"], ["a", None]]},
        {"key_b64": base64.b64encode(b"\x80\x01").decode(), "value_b64": base64.b64encode(b"\xff").decode()},
        {"key": "gone", "value": None},
    ]
    response = client.post(
        "/api/v1/topics/produced/messages", json={"records": records, "compression": "zstd"}
    )
    assert response.status_code == 201, response.text
    offsets = response.json()["offsets"]
    assert offsets[0]["partition"] == offsets[1]["partition"]
    assert offsets[1]["offset"] == offsets[0]["offset"] + 1
    assert offsets[2] == {"partition": 3, "offset": 0}
    first = client.get(
        f"/api/v1/topics/produced/partitions/{offsets[0]['partition']}/offsets/{offsets[0]['offset']}"
    )
    assert first.json()["value"] == json.dumps({"n": 1}, separators=(",", ":"))
    assert first.json()["timestamp"] == BASE_TS and first.json()["client_id"] == "p-1"
    third = client.get("/api/v1/topics/produced/partitions/3/offsets/0").json()
    assert third["headers"] == [
        {"name": "a", "value": "1", "value_b64": None},
        {"name": "a", "value": None, "value_b64": None},
    ]
    fourth = offsets[3]
    raw = client.get(
        f"/api/v1/topics/produced/partitions/{fourth['partition']}/offsets/{fourth['offset']}"
    ).json()
    assert base64.b64decode(raw["key_b64"]) == b"\x80\x01"
    tomb = offsets[4]
    gone = client.get(
        f"/api/v1/topics/produced/partitions/{tomb['partition']}/offsets/{tomb['offset']}"
    ).json()
    assert gone["value"] is None and gone["value_b64"] is None


def test_produce_rejects_bad_records_and_writes_nothing(client: httpx.Client) -> None:
    client.post("/api/v1/topics", json={"name": "rejects", "partitions": 1})
    assert_problem(
        client.post(
            "/api/v1/topics/rejects/messages",
            json={"records": [{"value": "a"}, {"value": "b", "partition": 5}]},
        ),
        404,
        "unknown-partition",
    )
    assert_problem(
        client.post(
            "/api/v1/topics/rejects/messages", json={"records": [{"value": "a", "value_b64": "AA=="}]}
        ),
        422,
        "invalid-parameter",
    )
    assert_problem(client.post("/api/v1/topics/rejects/messages", json={"records": []}), 422, "validation")
    assert_problem(
        client.post("/api/v1/topics/nope/messages", json={"records": [{"value": "a"}]}), 404, "unknown-topic"
    )
    assert client.get("/api/v1/topics/rejects/partitions/0").json()["log_end_offset"] == 0


def test_keyless_records_on_a_compacted_topic_are_refused(client: httpx.Client) -> None:
    assert_problem(
        client.post("/api/v1/topics/users/messages", json={"records": [{"value": "no key"}]}),
        422,
        "invalid-record",
    )


def test_group_lag_per_partition_with_never_committed_partitions_marked(client: httpx.Client) -> None:
    groups = client.get("/api/v1/groups").json()
    billing = next(g for g in groups if g["group"] == GROUP)
    assert billing["topics"] == ["orders"] and billing["lag"] == ORDERS_PER_PARTITION - 250
    body = client.get(f"/api/v1/groups/{GROUP}").json()
    rows = {r["partition"]: r for r in body["partitions"]}
    assert rows[0]["committed_offset"] == 250 and rows[0]["lag"] == 50 and rows[0]["time_lag_ms"] > 0
    assert rows[1]["lag"] == 0 and rows[1]["time_lag_ms"] == 0
    assert rows[2]["committed_offset"] is None and rows[2]["lag"] is None
    assert rows[2]["never_committed"] and not rows[0]["never_committed"]
    assert body["topic_lags"] == [
        {
            "topic": "orders",
            "tags": None,
            "lag": 50,
            "time_lag_ms": rows[0]["time_lag_ms"],
            "tag_lag": None,
            "tag_time_lag_ms": None,
            "never_committed_partitions": 1,
        }
    ]
    assert body["never_committed_partitions"] == 1 and body["subscriptions"] == {}
    assert_problem(client.get("/api/v1/groups/nobody"), 404, "unknown-group")
    assert_problem(client.get(f"/api/v1/groups/{GROUP}", params={"topic": "nope"}), 404, "unknown-topic")


def test_compaction_status_for_compacted_topics(client: httpx.Client) -> None:
    all_status = client.get("/api/v1/compaction").json()
    assert {t["topic"] for t in all_status} >= {"users", "__consumer_offsets"}
    users = client.get("/api/v1/topics/users/compaction").json()
    assert users["compacted"] and users["cleanup_policy"] == "compact"
    (part,) = users["partitions"]
    assert part["first_dirty_offset"] == 0 and part["log_end_offset"] == 12
    assert part["min_cleanable_dirty_ratio"] == 0.5 and part["uncleanable_reason"] is None
    orders = client.get("/api/v1/topics/orders/compaction").json()
    assert orders == {"topic": "orders", "cleanup_policy": "delete", "compacted": False, "partitions": []}


def test_metrics_are_prometheus_text(client: httpx.Client) -> None:
    client.get("/api/v1/topics/orders")
    response = client.get("/metrics")
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    lines = response.text.splitlines()
    assert 'logtrove_log_end_offset{topic="orders",partition="0"} 300' in lines
    assert f'logtrove_group_lag{{group="{GROUP}",topic="orders",partition="0"}} 50' in lines
    assert any(
        line.startswith(
            'logtrove_http_requests_total{method="GET",route="/api/v1/topics/{topic}",status="200"}'
        )
        for line in lines
    )
    assert not any(line.startswith("logtrove_index_") for line in lines), "no indexer ran: no index figures"
    names = [line.split()[2] for line in lines if line.startswith("# TYPE")]
    assert len(names) == len(set(names)), "one TYPE line per family"
    for line in lines:
        if not line.startswith("#"):
            float(line.rsplit(" ", 1)[1])


def test_openapi_schema_documents_problems(client: httpx.Client) -> None:
    schema = client.get("/openapi.json").json()
    op = schema["paths"]["/api/v1/topics/{topic}"]["get"]
    assert "application/problem+json" in op["responses"]["404"]["content"]
    assert "/ui/" not in schema["paths"]


def test_tag_subscription_gives_exact_tag_lag_and_can_be_removed(
    client: httpx.Client, dataset: Dataset
) -> None:
    url = f"/api/v1/groups/{TAGGED_GROUP}/subscriptions/orders"
    put = client.put(url, json={"tags": "TagA"})
    assert put.status_code == 200, put.text
    assert put.json()["tags"] == "TagA"
    body = client.get(f"/api/v1/groups/{TAGGED_GROUP}").json()
    assert body["subscriptions"] == {"orders": "TagA"}
    p0 = body["partitions"][0]
    expected = sum(1 for r in dataset.orders[0][100:] if dict(r.headers)["tag"] == b"TagA")
    assert (p0["lag"], p0["tag_lag"], p0["tags"]) == (200, expected, "TagA")
    assert p0["tag_time_lag_ms"] > 0
    assert body["tag_lag"] == expected and body["topic_lags"][0]["tags"] == "TagA"
    metrics = client.get("/metrics").text
    assert (
        f'logtrove_group_tag_lag{{tags="TagA",group="{TAGGED_GROUP}",topic="orders",partition="0"}} {expected}'
        in metrics.splitlines()
    )

    either = client.put(url, json={"tags": "TagB ||  TagA"}).json()
    assert either["tags"] == "TagB || TagA"
    both = client.get(f"/api/v1/groups/{TAGGED_GROUP}").json()["partitions"][0]
    assert both["tag_lag"] == 200

    assert client.delete(url).status_code == 204
    gone = client.get(f"/api/v1/groups/{TAGGED_GROUP}").json()
    assert gone["subscriptions"] == {} and gone["partitions"][0]["tag_lag"] is None
    assert_problem(client.delete(url), 404, "unknown-subscription")


def test_tag_subscription_input_errors(client: httpx.Client) -> None:
    assert_problem(
        client.put(f"/api/v1/groups/{GROUP}/subscriptions/orders", json={"tags": "A ||"}), 422, "invalid-tags"
    )
    assert_problem(
        client.put(f"/api/v1/groups/{GROUP}/subscriptions/nope", json={"tags": "A"}), 404, "unknown-topic"
    )
    assert_problem(client.put(f"/api/v1/groups/{GROUP}/subscriptions/orders", json={}), 422, "validation")


def test_topic_groups_lists_the_consumers_of_a_topic(client: httpx.Client) -> None:
    groups = {g["group"]: g for g in client.get("/api/v1/topics/orders/groups").json()}
    assert groups[GROUP]["lag"] == 50 and groups[GROUP]["never_committed_partitions"] == 1
    assert client.get("/api/v1/topics/users/groups").json() == []
    assert_problem(client.get("/api/v1/topics/nope/groups"), 404, "unknown-topic")
