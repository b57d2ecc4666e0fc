"""The cluster tests' no-loss checker (tests/integration/no_loss.py) reports each kind of
damage it exists to find, and nothing for a log that kept every acknowledged record once."""

from __future__ import annotations

from integration.no_loss import no_loss_problems

ACKNOWLEDGED = {0: [0, 1, 2, 3], 1: [0, 1]}


def test_a_complete_log_has_no_problems_even_with_unacknowledged_records_in_it() -> None:
    # Sequence 4 was written but its acknowledgement never arrived: allowed.
    assert no_loss_problems(ACKNOWLEDGED, {0: [0, 1, 2, 3, 4], 1: [0, 1]}) == []


def test_a_lost_acknowledged_record_is_reported() -> None:
    assert no_loss_problems(ACKNOWLEDGED, {0: [0, 1, 3], 1: [0, 1]}) == [
        "partition 0: 1 acknowledged records lost, first [2]"
    ]


def test_a_partition_never_read_loses_all_its_acknowledged_records() -> None:
    assert no_loss_problems(ACKNOWLEDGED, {0: [0, 1, 2, 3]}) == [
        "partition 1: 2 acknowledged records lost, first [0, 1]"
    ]


def test_a_duplicate_is_reported() -> None:
    assert no_loss_problems(ACKNOWLEDGED, {0: [0, 1, 2, 3], 1: [0, 1, 1]}) == [
        "partition 1: 1 records read more than once",
        "partition 1: records out of the order they were sent",
    ]


def test_records_out_of_order_are_reported() -> None:
    assert no_loss_problems(ACKNOWLEDGED, {0: [0, 2, 1, 3], 1: [0, 1]}) == [
        "partition 0: records out of the order they were sent"
    ]
