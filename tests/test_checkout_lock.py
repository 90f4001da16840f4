"""The checkout lock: a test that changes the checkout waits for the tests running now and
runs alone; readers that come while it waits run after it (tests/checkout_lock.py)."""
import fcntl
import threading
import time

import checkout_lock


def hold(directory, exclusive, entered, leave):
    def run():
        with checkout_lock.held(directory, exclusive):
            entered.set()
            leave.wait(30)
    t = threading.Thread(target=run)
    t.start()
    return t


def turnstile_taken(directory) -> bool:
    with open(directory / "checkout.turnstile", "a+") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(f, fcntl.LOCK_UN)
        return False


def test_readers_share_and_a_writer_waits_its_turn(tmp_path):
    events = {name: (threading.Event(), threading.Event()) for name in ("a", "b", "w", "late")}
    a = hold(tmp_path, False, *events["a"])
    b = hold(tmp_path, False, *events["b"])
    assert events["a"][0].wait(10) and events["b"][0].wait(10)  # two readers at once

    w = hold(tmp_path, True, *events["w"])
    deadline = time.monotonic() + 10
    while not turnstile_taken(tmp_path):  # the writer waits, holding the turnstile
        assert time.monotonic() < deadline, "the writer never took the turnstile"
        time.sleep(0.01)
    late = hold(tmp_path, False, *events["late"])
    assert not events["w"][0].wait(0.3), "the writer ran beside readers"

    events["a"][1].set(), events["b"][1].set()
    a.join(10), b.join(10)
    assert events["w"][0].wait(10), "the writer did not run once the readers left"
    assert not events["late"][0].is_set(), "a reader that came after the writer ran beside it"
    events["w"][1].set()
    w.join(10)
    assert events["late"][0].wait(10)
    events["late"][1].set()
    late.join(10)
