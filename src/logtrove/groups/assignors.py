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

import re
from collections.abc import Callable, Mapping

Assignment = dict[str, dict[str, set[int]]]
"""member ID → topic → partitions."""

Assignor = Callable[
    [Mapping[str, frozenset[str]], Mapping[str, int], Mapping[str, Mapping[str, set[int]]]], Assignment
]

MAX_REGEX_CHARS = 1000


class InvalidRegexError(ValueError):
    """A subscription regex that does not compile (or is too long to be trusted)."""


def compile_regex(pattern: str) -> re.Pattern[str]:
    """The compiled subscription regex, matched against whole topic names (as Kafka's
    RE2J ``matches``); raises :class:`InvalidRegexError`."""
    if len(pattern) > MAX_REGEX_CHARS:
        raise InvalidRegexError(f"the regex is longer than {MAX_REGEX_CHARS} characters")
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise InvalidRegexError(str(exc)) from exc


def resolve_subscription(
    names: frozenset[str], regex: str | None, topics: Mapping[str, int]
) -> frozenset[str]:
    """The existing topics a member subscribes to: its names that exist, plus every
    topic whose whole name matches ``regex``. Internal topics (``__``) never match a
    regex, as in Kafka."""
    found = {n for n in names if n in topics}
    if regex:
        pattern = compile_regex(regex)
        found |= {t for t in topics if not t.startswith("__") and pattern.fullmatch(t)}
    return frozenset(found)


def uniform(
    members: Mapping[str, frozenset[str]],
    partitions: Mapping[str, int],
    current: Mapping[str, Mapping[str, set[int]]],
) -> Assignment:
    """Balanced and sticky: (1) every member keeps the partitions it holds that it still
    subscribes to (a partition held twice stays with the first member in ID order);
    (2) each unassigned partition goes to the least loaded member subscribed to its
    topic; (3) while a member holds at least two more partitions than a member that
    could take one of them, its highest partition moves there. Step 3 strictly lowers
    the sum of squared loads, so it ends."""
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
    _balance(owner, load, eligible)
    for (topic, p), m in owner.items():
        result[m].setdefault(topic, set()).add(p)
    return result


def _balance(owner: dict[tuple[str, int], str], load: dict[str, int], eligible: dict[str, list[str]]) -> None:
    """Step 3 of :func:`uniform`: move partitions from the most loaded members to
    less loaded eligible ones until no move lowers the imbalance."""
    moved = True
    while moved:
        moved = False
        held: dict[str, list[tuple[str, int]]] = {}
        for tp, m in owner.items():
            held.setdefault(m, []).append(tp)
        for m in sorted(held, key=lambda x: (-load[x], x)):
            for tp in sorted(held[m], reverse=True):
                target = min(eligible[tp[0]], key=lambda x: (load[x], x))
                if load[target] <= load[m] - 2:
                    owner[tp] = target
                    load[m] -= 1
                    load[target] += 1
                    moved = True
                    break
            if moved:
                break


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
