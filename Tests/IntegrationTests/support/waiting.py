"""Waiting for a condition rather than for a time: what a test that depends on scheduling
does, so that a slow or loaded machine makes it slower, never red."""
import time


def wait_until(condition, seconds, what):
    """Polls `condition` every 0.1 s until it holds; fails with `what` if it still does not
    after `seconds` (a bound on a hang, not the time the test expects to take)."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)
