"""Transaction APIs: AddPartitionsToTxn (24), AddOffsetsToTxn (25), EndTxn (26),
TxnOffsetCommit (28), DescribeTransactions (65), ListTransactions (66), and
InitProducerId with a transactional ID.

Thin adapters between the kio request bodies of every version and
:class:`logtrove.txn.TransactionCoordinator`, which holds the semantics. Requests of the
versions before ``PRODUCER_FENCED`` existed get ``INVALID_PRODUCER_EPOCH`` instead, as
Kafka answers them (InitProducerId below v4, the others below v2). Each answer waits
until the coordinator's state is on disk (:meth:`TransactionCoordinator.flush`, off the
event loop); if it cannot be written the answer is COORDINATOR_NOT_AVAILABLE (retriable).

Authorization, as Kafka's ``KafkaApis``: every transactional request needs WRITE on its
TRANSACTIONAL_ID (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); AddPartitionsToTxn WRITE on each
topic, AddOffsetsToTxn READ on the group, TxnOffsetCommit READ on the group and on each
topic; DescribeTransactions and ListTransactions show the IDs the principal may DESCRIBE.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from logtrove.acl import Operation
from logtrove.broker.access import Check, names_of, on_cluster, per_resource
from logtrove.broker.authorize import Resource
from logtrove.broker.context import serves
from logtrove.groups import CommittedOffset
from logtrove.storage import StorageError
from logtrove.txn import TxnState
from logtrove.wire import ApiKey, ms

if TYPE_CHECKING:
    from logtrove.broker.context import BrokerContext
    from logtrove.broker.requests import Reply, Request

FENCED_SINCE = 2  # the first version of 24/25/26/28 that knows PRODUCER_FENCED
INIT_FENCED_SINCE = 4


def _fenced(code: ErrorCode, version: int, since: int = FENCED_SINCE) -> ErrorCode:
    """``code``, or INVALID_PRODUCER_EPOCH for a version that predates PRODUCER_FENCED."""
    if code == ErrorCode.producer_fenced and version < since:
        return ErrorCode.invalid_producer_epoch
    return code


async def _durable(broker: BrokerContext, code: ErrorCode) -> ErrorCode:
    """``code`` once the state is on disk, or COORDINATOR_NOT_AVAILABLE if it cannot be."""
    if not await broker.txn.flush():
        return ErrorCode.coordinator_not_available
    return code


async def init_transactional_producer(broker: BrokerContext, request: Request) -> Reply:
    """InitProducerId for a transactional ID (see produce.handle_init_producer_id)."""
    body = request.body
    if not body.transactional_id:  # Kafka: an empty transactional ID is INVALID_REQUEST
        return {"error_code": ErrorCode.invalid_request, "producer_id": -1, "producer_epoch": -1}
    code, pid, epoch = broker.txn.init_producer_id(
        body.transactional_id,
        ms(body.transaction_timeout),
        getattr(body, "producer_id", -1),
        getattr(body, "producer_epoch", -1),
    )
    code = await _durable(broker, code)
    if code:
        pid, epoch = -1, -1
    return {
        "error_code": _fenced(code, request.version, INIT_FENCED_SINCE),
        "producer_id": pid,
        "producer_epoch": epoch,
    }


def _exists(broker: BrokerContext, topic: str, partition: int) -> bool:
    storage = broker.storage
    return storage.has_topic(topic) and 0 <= partition < storage.topic(topic).partitions


def _may_write(broker: BrokerContext, request: Request, tid: str, *, audited: bool = True) -> bool:
    return broker.allowed(request, Operation.WRITE, Resource.TRANSACTIONAL_ID, tid, audited=audited)


def _add_partitions(
    broker: BrokerContext, request: Request, tid: str, pid: int, epoch: int, topics: Any
) -> list[dict[str, Any]]:
    """One transaction's AddPartitionsToTxn: per-topic results. A partition that does not
    exist, of a topic the principal may not write, or that takes no markers (a mirrored
    one: :meth:`~logtrove.txn.TransactionCoordinator.unmarkable`) fails the whole request,
    the others answered OPERATION_NOT_ATTEMPTED (Kafka)."""
    version = request.version
    asked = [(t.name, p) for t in topics for p in t.partitions]
    if not _may_write(broker, request, tid):
        codes = dict.fromkeys(asked, ErrorCode.transactional_id_authorization_failed)
        return _by_topic(topics, codes)
    denied = {t.name for t in topics if not broker.allowed(request, Operation.WRITE, Resource.TOPIC, t.name)}
    if denied:
        codes = {
            tp: ErrorCode.topic_authorization_failed if tp[0] in denied else ErrorCode.operation_not_attempted
            for tp in asked
        }
        return _by_topic(topics, codes)
    refused = {tp: ErrorCode.unknown_topic_or_partition for tp in asked if not _exists(broker, *tp)}
    refused.update(broker.txn.unmarkable(tp for tp in asked if tp not in refused))
    if refused:
        codes = {tp: refused.get(tp, ErrorCode.operation_not_attempted) for tp in asked}
    else:
        code = _fenced(broker.txn.add_partitions(tid, pid, epoch, asked), version)
        codes = dict.fromkeys(asked, code)
    return _by_topic(topics, codes)


def _by_topic(topics: Any, codes: dict[tuple[str, int], ErrorCode]) -> list[dict[str, Any]]:
    return [
        {
            "name": t.name,
            "results_by_partition": [
                {"partition_index": p, "partition_error_code": codes[(t.name, p)]} for p in t.partitions
            ],
        }
        for t in topics
    ]


@serves(
    ApiKey.ADD_PARTITIONS_TO_TXN,
    0,
    4,
    access=on_cluster(  # v4+ is the batched form brokers send (KIP-890): CLUSTER_ACTION, as Kafka
        Operation.CLUSTER_ACTION,
        applies=lambda request: request.version >= 4,
        checks=(
            Check(Resource.TRANSACTIONAL_ID, Operation.WRITE, names_of("v3_and_below_transactional_id")),
            Check(Resource.TRANSACTIONAL_ID, Operation.WRITE, names_of("transactions", "transactional_id")),
            Check(Resource.TOPIC, Operation.WRITE),  # after the transactional ID
        ),
    ),
)
async def handle_add_partitions_to_txn(broker: BrokerContext, request: Request) -> Reply:
    """AddPartitionsToTxn: v0–3 name one transaction; v4 (the batched form brokers send)
    names several, each answered on its own. ``verify_only`` (KIP-890 verification) asks
    whether the partitions are already in the transaction, without adding them."""
    body = request.body
    await _load_transactions(broker, request)
    if request.version <= 3:
        results = _add_partitions(
            broker,
            request,
            body.v3_and_below_transactional_id,
            body.v3_and_below_producer_id,
            body.v3_and_below_producer_epoch,
            body.v3_and_below_topics,
        )
        return {"results_by_topic_v3_and_below": await _durable_results(broker, results)}
    out = []
    for txn in body.transactions:
        if txn.verify_only:
            topics = _verify(broker, txn)
        else:
            topics = _add_partitions(
                broker, request, txn.transactional_id, txn.producer_id, txn.producer_epoch, txn.topics
            )
        out.append({"transactional_id": txn.transactional_id, "topic_results": topics})
    if not await broker.txn.flush():
        return {"error_code": ErrorCode.coordinator_not_available, "results_by_transaction": []}
    return {"results_by_transaction": out}


async def _durable_results(broker: BrokerContext, results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The per-partition results, all COORDINATOR_NOT_AVAILABLE if the state cannot be written."""
    if await broker.txn.flush():
        return results
    for topic in results:
        for p in topic["results_by_partition"]:
            p["partition_error_code"] = ErrorCode.coordinator_not_available
    return results


async def _load_transactions(broker: BrokerContext, request: Request) -> None:
    """Build, off the event loop, the transaction state of the partitions being added, so
    that the markers written to them later never walk a log on the loop. Only of the
    partitions the principal may add: a refused request builds nothing."""
    body = request.body
    if request.version <= 3:
        if not _may_write(broker, request, body.v3_and_below_transactional_id, audited=False):
            return
        topics = body.v3_and_below_topics
    else:
        topics = [t for txn in body.transactions for t in txn.topics]
    for t in topics:
        if not broker.allowed(request, Operation.WRITE, Resource.TOPIC, t.name, audited=False):
            continue
        for p in t.partitions:
            if _exists(broker, t.name, p):
                try:
                    await broker.txn.indexes.load(broker.storage.log(t.name, p))
                except StorageError:  # a partition that cannot be opened: its markers are skipped
                    continue


def _verify(broker: BrokerContext, txn: Any) -> list[dict[str, Any]]:
    meta = broker.txn.get(txn.transactional_id)
    current = (
        meta is not None
        and meta.producer_id == txn.producer_id
        and meta.producer_epoch == txn.producer_epoch
        and meta.state is TxnState.ONGOING
    )
    return [
        {
            "name": t.name,
            "results_by_partition": [
                {
                    "partition_index": p,
                    "partition_error_code": ErrorCode.none
                    if current and meta is not None and (t.name, p) in meta.partitions
                    else ErrorCode.invalid_txn_state,
                }
                for p in t.partitions
            ],
        }
        for t in txn.topics
    ]


@serves(
    ApiKey.ADD_OFFSETS_TO_TXN,
    0,
    4,
    access=per_resource(
        Check(Resource.TRANSACTIONAL_ID, Operation.WRITE, names_of("transactional_id")),
        Check(Resource.GROUP, Operation.READ),  # after the transactional ID
    ),
)
async def handle_add_offsets_to_txn(broker: BrokerContext, request: Request) -> Reply:
    body = request.body
    if not _may_write(broker, request, body.transactional_id):
        return {"error_code": ErrorCode.transactional_id_authorization_failed}
    if not broker.allowed(request, Operation.READ, Resource.GROUP, body.group_id):
        return {"error_code": ErrorCode.group_authorization_failed}
    code = broker.txn.add_offsets(body.transactional_id, body.producer_id, body.producer_epoch, body.group_id)
    return {"error_code": _fenced(await _durable(broker, code), request.version)}


@serves(
    ApiKey.END_TXN,
    0,
    4,
    access=per_resource(Check(Resource.TRANSACTIONAL_ID, Operation.WRITE, names_of("transactional_id"))),
)
async def handle_end_txn(broker: BrokerContext, request: Request) -> Reply:
    body = request.body
    tid = body.transactional_id
    if not _may_write(broker, request, tid):
        return {"error_code": ErrorCode.transactional_id_authorization_failed}
    code = broker.txn.end_txn(tid, body.producer_id, body.producer_epoch, body.committed)
    decided = await broker.txn.flush()
    if body.committed and not code:
        broker.txn.complete_commit(tid, decided=decided)
        broker.txn.flush_later()  # Complete*: a restart that misses it completes the commit again
    if not decided:
        code = ErrorCode.coordinator_not_available
    return {"error_code": _fenced(code, request.version)}


@serves(
    ApiKey.TXN_OFFSET_COMMIT,
    0,
    4,
    access=per_resource(
        Check(Resource.TOPIC, Operation.READ, names_of("topics", "name")),
        Check(Resource.TRANSACTIONAL_ID, Operation.WRITE, names_of("transactional_id")),
        Check(Resource.GROUP, Operation.READ),  # after the transactional ID
    ),
)
async def handle_txn_offset_commit(broker: BrokerContext, request: Request) -> Reply:
    """TxnOffsetCommit: offsets held by the transaction until it commits. A request naming
    a generation (v3) is checked against the group as OffsetCommit is."""
    body = request.body
    now = broker.storage.clock.now_ms()
    commits = {
        (t.name, p.partition_index): CommittedOffset(
            p.committed_offset, getattr(p, "committed_leader_epoch", -1), p.committed_metadata or "", now
        )
        for t in body.topics
        for p in t.partitions
    }
    member = getattr(body, "member_id", "")
    generation = getattr(body, "generation_id", -1)
    code = ErrorCode.none
    denied = {
        t.name for t in body.topics if not broker.allowed(request, Operation.READ, Resource.TOPIC, t.name)
    }
    if not _may_write(broker, request, body.transactional_id):
        code = ErrorCode.transactional_id_authorization_failed
    elif not broker.allowed(request, Operation.READ, Resource.GROUP, body.group_id):
        code = ErrorCode.group_authorization_failed
    elif generation >= 0:  # Kafka checks the member only for a commit naming a generation
        code = broker.groups.check_committer(
            body.group_id, member, generation, getattr(body, "group_instance_id", None)
        )
    missing = {tp for tp in commits if not _exists(broker, *tp) or tp[0] in denied}
    if not code:
        code = broker.txn.commit_offsets(
            body.transactional_id,
            body.producer_id,
            body.producer_epoch,
            body.group_id,
            {tp: c for tp, c in commits.items() if tp not in missing},
        )
    code = _fenced(await _durable(broker, code), request.version)
    return {
        "topics": [
            {
                "name": t.name,
                "partitions": [
                    {
                        "partition_index": p.partition_index,
                        "error_code": ErrorCode.topic_authorization_failed
                        if t.name in denied
                        else ErrorCode.unknown_topic_or_partition
                        if (t.name, p.partition_index) in missing
                        else code,
                    }
                    for p in t.partitions
                ],
            }
            for t in body.topics
        ]
    }


@serves(
    ApiKey.DESCRIBE_TRANSACTIONS,
    0,
    0,
    access=per_resource(
        Check(Resource.TRANSACTIONAL_ID, Operation.DESCRIBE, names_of("transactional_ids")),
        Check(Resource.TOPIC, Operation.DESCRIBE, listing=True),
    ),
)
async def handle_describe_transactions(broker: BrokerContext, request: Request) -> Reply:
    """DescribeTransactions; an entry in error has start time 0 (as Kafka's), a known ID
    with no transaction open -1."""
    states = []
    for tid in request.body.transactional_ids:
        txn = broker.txn.get(tid)
        if not broker.allowed(request, Operation.DESCRIBE, Resource.TRANSACTIONAL_ID, tid):
            code = ErrorCode.transactional_id_authorization_failed
            states.append(
                {"transactional_id": tid, "error_code": code, "transaction_start_time": 0, "topics": []}
            )
            continue
        if txn is None:
            code = ErrorCode.transactional_id_not_found
            states.append(
                {"transactional_id": tid, "error_code": code, "transaction_start_time": 0, "topics": []}
            )
            continue
        topics: dict[str, list[int]] = {}
        for t, p in sorted(txn.partitions):  # those of topics it may not describe left out (Kafka)
            if broker.allowed(request, Operation.DESCRIBE, Resource.TOPIC, t, audited=False):
                topics.setdefault(t, []).append(p)
        states.append(
            {
                "transactional_id": tid,
                "transaction_state": txn.state.value,
                "transaction_timeout": txn.timeout_ms,
                "transaction_start_time": txn.start_ms,
                "producer_id": txn.producer_id,
                "producer_epoch": txn.producer_epoch,
                "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
            }
        )
    return {"transaction_states": states}


@serves(
    ApiKey.LIST_TRANSACTIONS,
    0,
    1,
    access=per_resource(Check(Resource.TRANSACTIONAL_ID, Operation.DESCRIBE, listing=True)),
)
async def handle_list_transactions(broker: BrokerContext, request: Request) -> Reply:
    """ListTransactions, filtered by state, producer ID and (v1) a minimum running time."""
    body = request.body
    known = {s.value for s in TxnState}
    wanted = set(body.state_filters)
    pids = set(body.producer_id_filters)
    min_ms = getattr(body, "duration_filter", -1)
    now = broker.storage.clock.now_ms()
    listed = [
        {
            "transactional_id": t.transactional_id,
            "producer_id": t.producer_id,
            "transaction_state": t.state.value,
        }
        for t in broker.txn.transactions()
        if (not wanted or t.state.value in wanted)
        and (not pids or t.producer_id in pids)
        and (min_ms < 0 or (t.start_ms >= 0 and now - t.start_ms >= min_ms))
        and broker.allowed(
            request, Operation.DESCRIBE, Resource.TRANSACTIONAL_ID, t.transactional_id, audited=False
        )
    ]
    return {"unknown_state_filters": sorted(wanted - known), "transaction_states": listed}
