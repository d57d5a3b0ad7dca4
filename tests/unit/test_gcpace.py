"""The collector's pace while workers run (alkstore/worker/gcpace.py)."""

from __future__ import annotations

import gc

from alkstore.worker.gcpace import YOUNG_THRESHOLD, paced


def test_the_pace_holds_while_any_worker_runs_and_is_undone_after_the_last() -> None:
    before = gc.get_threshold()
    try:
        gc.set_threshold(700, *before[1:])
        with paced():
            assert gc.get_threshold()[0] == YOUNG_THRESHOLD
            assert gc.get_freeze_count() > 0
            with paced():  # a second worker in the process
                pass
            assert gc.get_threshold()[0] == YOUNG_THRESHOLD  # the first still runs
        assert gc.get_threshold() == (700, *before[1:])
        assert gc.get_freeze_count() == 0
    finally:
        gc.set_threshold(*before)


def test_a_higher_threshold_or_one_changed_meanwhile_is_left_alone() -> None:
    before = gc.get_threshold()
    try:
        gc.set_threshold(50_000, *before[1:])
        with paced():
            assert gc.get_threshold()[0] == 50_000
        gc.set_threshold(700, *before[1:])
        with paced():
            gc.set_threshold(1234, *before[1:])  # the app's own choice, made meanwhile
        assert gc.get_threshold()[0] == 1234
    finally:
        gc.set_threshold(*before)
