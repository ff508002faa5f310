"""Test helpers shipped with the package, reused by every subpackage's tests."""

from logtrove.testing.clock import FakeClock

__all__ = ["FakeClock"]
