"""Server-side assignors of the consumer group protocol (KIP-848): ``uniform`` and ``range``.

An assignor is a pure function of three things and nothing else:

* ``members``: member ID → the topic names it subscribes to (regexes already resolved
  against the existing topics, see :func:`resolve_subscription`);
* ``partitions``: topic name → partition count, for every subscribed topic that exists;
* ``current``: member ID → topic → the partitions of its current target assignment.

and returns the new target: member ID → topic → partitions, where every partition of a
subscribed topic goes to exactly one member subscribed to that topic, and every member of
``members`` has an entry (maybe empty). Results are deterministic: ties are broken by
member ID, so the same inputs always give the same target.

``uniform`` (Kafka's default) balances the partition *count* per member and is sticky:
a member keeps what it holds as long as the counts stay balanced (no member holds two
more than another member that could take one of its partitions). ``range`` gives each
member of a topic a contiguous run of its partitions, in member ID order, so members
subscribed to co-partitioned topics get the same partition numbers of each.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import re2

Assignment = dict[str, dict[str, set[int]]]
"""member ID → topic → partitions."""

Assignor = Callable[
    [Mapping[str, frozenset[str]], Mapping[str, int], Mapping[str, Mapping[str, set[int]]]], Assignment
]

MAX_REGEX_CHARS = 1000


class InvalidRegexError(ValueError):
    """A subscription regex that does not compile (or is too long to be trusted)."""


def compile_regex(pattern: str) -> Callable[[str], bool]:
    """Whether a topic name matches the subscription regex as a whole (Kafka matches with
    RE2J; this is RE2, also linear in time, so a hostile pattern cannot stall the event
    loop); raises :class:`InvalidRegexError`."""
    if len(pattern) > MAX_REGEX_CHARS:
        raise InvalidRegexError(f"the regex is longer than {MAX_REGEX_CHARS} characters")
    options = re2.Options()
    options.log_errors = False  # RE2 would print every refused pattern on stderr
    try:
        compiled = re2.compile(pattern, options)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        raise InvalidRegexError(
            reason.decode("utf-8", "replace") if isinstance(reason, bytes) else str(reason)
        ) from None
    return lambda name: compiled.fullmatch(name) is not None


def resolve_subscription(
    names: frozenset[str], regex: str | None, topics: Mapping[str, int]
) -> frozenset[str]:
    """The existing topics a member subscribes to: its names that exist, plus every
    topic whose whole name matches ``regex``. Internal topics (``__``) never match a
    regex, as in Kafka."""
    found = {n for n in names if n in topics}
    if regex:
        found |= matching_topics(regex, topics)
    return frozenset(found)


def matching_topics(regex: str, topics: Iterable[str]) -> frozenset[str]:
    """The topics whose whole name matches ``regex``, internal ones (``__``) excepted."""
    matches = compile_regex(regex)
    return frozenset(t for t in topics if not t.startswith("__") and matches(t))


def uniform(
    members: Mapping[str, frozenset[str]],
    partitions: Mapping[str, int],
    current: Mapping[str, Mapping[str, set[int]]],
) -> Assignment:
    """Balanced and sticky: (1) every member keeps the partitions it holds that it still
    subscribes to (a partition held twice stays with the first member in ID order);
    (2) each unassigned partition goes to the least loaded member subscribed to its
    topic; (3) while a member holds at least two more partitions than a member that
    could take one of them, one of its partitions moves there (one it got in step 2
    first). Step 3 strictly lowers the sum of squared loads, so it ends; and every
    member keeps at least ``min(what it held, total // members)`` of its partitions in
    a group where all subscribe to the same topics."""
    order = sorted(members)
    result: Assignment = {m: {} for m in order}
    owner: dict[tuple[str, int], str] = {}
    for m in order:
        for topic, held in sorted(current.get(m, {}).items()):
            if topic not in members[m] or topic not in partitions:
                continue
            for p in sorted(held):
                if p < partitions[topic] and (topic, p) not in owner:
                    owner[(topic, p)] = m
    kept = dict(owner)
    load = dict.fromkeys(order, 0)
    for m in owner.values():
        load[m] += 1
    eligible = {t: [m for m in order if t in members[m]] for t in partitions}
    for topic in sorted(partitions):
        for p in range(partitions[topic]):
            if (topic, p) not in owner and eligible[topic]:
                m = min(eligible[topic], key=lambda x: (load[x], x))
                owner[(topic, p)] = m
                load[m] += 1
    _balance(owner, load, eligible, kept)
    for (topic, p), m in owner.items():
        result[m].setdefault(topic, set()).add(p)
    return result


def _balance(
    owner: dict[tuple[str, int], str],
    load: dict[str, int],
    eligible: dict[str, list[str]],
    kept: dict[tuple[str, int], str],
) -> None:
    """Step 3 of :func:`uniform`: move partitions from the most loaded members to less
    loaded eligible ones, one at a time, the most loaded giving first. A member gives the
    partitions it got since step 1 before those it ``kept`` (partition → who kept it), so
    every member keeps at least its fair share of what it held."""
    held: dict[str, set[tuple[str, int]]] = {m: set() for m in load}
    for tp, m in owner.items():
        held[m].add(tp)
    while (move := _one_move(held, load, eligible, kept)) is not None:
        tp, giver, taker = move
        owner[tp] = taker
        held[giver].discard(tp)
        held[taker].add(tp)
        load[giver] -= 1
        load[taker] += 1


def _one_move(
    held: dict[str, set[tuple[str, int]]],
    load: dict[str, int],
    eligible: dict[str, list[str]],
    kept: dict[tuple[str, int], str],
) -> tuple[tuple[str, int], str, str] | None:
    """The next move of :func:`_balance`: from the most loaded member that can give one
    of its partitions to a member holding at least two fewer, the first partition in
    giving order, to the least loaded such member; None when there is none."""
    floor = min(load.values())
    for m in sorted(held, key=lambda x: (-load[x], x)):
        if load[m] - 2 < floor:
            return None
        for tp in sorted(held[m], key=lambda tp: (kept.get(tp) == m, tp[0], -tp[1])):
            target = min(eligible[tp[0]], key=lambda x: (load[x], x))
            if load[target] <= load[m] - 2:
                return tp, m, target
    return None


def range_(
    members: Mapping[str, frozenset[str]],
    partitions: Mapping[str, int],
    current: Mapping[str, Mapping[str, set[int]]],
) -> Assignment:
    """Per topic, its subscribers in member ID order each take a contiguous run: the
    first ``count % n`` members ``count // n + 1`` partitions, the others ``count // n``.
    ``current`` is not used: the layout depends only on who subscribes to what."""
    result: Assignment = {m: {} for m in sorted(members)}
    for topic in sorted(partitions):
        subscribers = [m for m in sorted(members) if topic in members[m]]
        if not subscribers:
            continue
        base, extra = divmod(partitions[topic], len(subscribers))
        start = 0
        for i, m in enumerate(subscribers):
            size = base + (1 if i < extra else 0)
            if size:
                result[m][topic] = set(range(start, start + size))
            start += size
    return result


ASSIGNORS: dict[str, Assignor] = {"uniform": uniform, "range": range_}
DEFAULT_ASSIGNOR = "uniform"
