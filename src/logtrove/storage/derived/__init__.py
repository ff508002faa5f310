"""The derived indexes of a segment: written by the indexer, read by queries and tag reads.

Beside each segment's ``.log`` the indexer writes three files of blocks
(:mod:`.blockfile`), each block covering the same run of the log; readers trust only the
prefix the three agree on and read the rest from the log. Everything here can be rebuilt
from the ``.log`` file, and a missing or damaged file is rebuilt, never fatal::

                       writes                                 reads
    Indexer ─────────▶ .tagidx  tags of records (.tagindex)  ◀──── tag_blocks (groups.tags)
    (thread, or the    .skip    time bounds and value-token  ◀──┐
     child process)             Bloom filter (.skipindex)       ├── index_view (query)
                       .keyidx  key / ID / header hash       ◀──┘
                                tables (.keyindex)

======================  ==================================================================
module                  job
======================  ==================================================================
:mod:`.paths`           where the three files live, and their write order
:mod:`.blockfile`       the block framing they share (header, CRC, chain of blocks)
:mod:`.keyindex`        ``.keyidx`` payload: hash tables of keys, IDs and indexed headers
:mod:`.tagindex`        ``.tagidx`` payload: one (offset, tag hash) entry per tagged record
:mod:`.skipindex`       ``.skip`` payload: record count, time bounds, token Bloom filter
:mod:`.blockentries`    what one block needs from its records, collected per batch (the
                        indexer's per-record loop; compiled twin ``_indexcore.c``)
:mod:`.indexer`         the writer: one builder per segment, one indexer per storage
:mod:`.process`         the indexer in a child process, restarted when it dies
:mod:`.views`           the query reader: a segment's key and skip blocks (the prefix the
                        three files agree on)
:mod:`.tagblocks`       the tag reader: a segment's decoded ``.tagidx`` blocks
:mod:`.cache`           the one cache readers keep what they decoded in
======================  ==================================================================

The segment's own sparse indexes (``.index``, ``.timeindex``) are not here: the segment
writes them as it appends (:mod:`logtrove.storage.index`), as Kafka's ``LogSegment`` does.

Readers import the modules they read with, never the writer (the ``derived`` contract in
pyproject.toml), so this package exports nothing of its own: importing a reader loads no
indexer and no process machinery.
"""
