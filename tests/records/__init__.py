"""Tests of the RecordBatch v2 codec (``logtrove.records``)."""
