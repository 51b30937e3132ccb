"""The default analysis requirement extractor: pure, deterministic, one id per thing asked."""

from __future__ import annotations

import pytest

from plangate.protocol import extract_requirements
from plangate.protocol.intent import effective_intent_text
from plangate.protocol.requirements import MAX_REQUIREMENTS


@pytest.mark.parametrize(
    ("task", "expected"),
    [
        (
            "revenue by region last quarter",
            ("metric:revenue", "dimension:region", "time:last-quarter"),
        ),
        (
            "Top 5 products by revenue in 2026-Q3, excluding refunds, only completed orders",
            (
                "metric:revenue",
                "dimension:product",
                "time:2026-q3",
                "filter:exclude-refunds",
                "filter:order=completed",
                "limit:top-5",
            ),
        ),
        (
            "monthly sales in the West region since 2025-01-01 compared to the previous year",
            (
                "metric:sales",
                "dimension:month",
                "time:since-2025-01-01",
                "filter:region=west",
                "compare:previous-period",
            ),
        ),
        (
            "how many orders per customer for each channel, last 30 days, where channel is online",
            (
                "metric:orders",
                "dimension:customer",
                "dimension:channel",
                "time:last-30-days",
                "filter:channel=online",
            ),
        ),
        (
            "conversion rate by channel year to date",
            ("metric:conversion-rate", "dimension:channel", "time:ytd"),
        ),
        (
            "revenue in March 2026 between 2026-03-01 and 2026-03-15",
            ("metric:revenue", "time:2026-03", "time:2026-03-01..2026-03-15"),
        ),
        (
            "帮我分析上季度各地区的销售额，按月拆分，同比",
            (
                "metric:revenue",
                "dimension:region",
                "dimension:month",
                "time:last-quarter",
                "compare:year-over-year",
            ),
        ),
        ("最近30天前10名产品的销量", ("metric:units", "time:last-30-days", "limit:top-10")),
    ],
)
def test_metrics_breakdowns_windows_filters_and_cuts_are_named(
    task: str, expected: tuple[str, ...]
) -> None:
    assert extract_requirements(task) == expected


@pytest.mark.parametrize(
    "task",
    ["", "try again", "write the README", "sales pitch for the team", "grew by about 5%"],
)
def test_text_asking_for_no_data_gives_no_requirements(task: str) -> None:
    assert extract_requirements(task) == ()


def test_ordering_by_a_metric_or_explaining_a_change_is_not_a_breakdown() -> None:
    assert extract_requirements("sales by region and month, sorted by revenue") == (
        "metric:sales",
        "metric:revenue",
        "dimension:region",
        "dimension:month",
    )
    assert extract_requirements("the drop was driven by the north") == ()


def test_a_comparison_year_is_not_mistaken_for_the_window_it_is_compared_with() -> None:
    assert extract_requirements("revenue Q3 2026 vs 2025") == (
        "metric:revenue",
        "time:2026-q3",
        "time:2025",
    )


def test_a_weak_follow_up_keeps_the_task_and_a_refinement_adds_to_it() -> None:
    task = "revenue by region last quarter"
    again = effective_intent_text(task, "try again", "continue")
    refined = effective_intent_text(task, "break it down by month", "refine")
    assert extract_requirements(again) == extract_requirements(task)
    assert extract_requirements(refined) == (
        "metric:revenue",
        "dimension:region",
        "dimension:month",
        "time:last-quarter",
    )


def test_ids_read_back_whole_from_a_comma_separated_line() -> None:
    ids = extract_requirements("revenue where segment is 'small business' in the North East region")
    assert ids and all(not set(i) & {" ", ",", ";"} for i in ids)
    assert "filter:region=north-east" in ids


def test_the_same_text_gives_the_same_ids_and_at_most_the_cap() -> None:
    words = "region city store brand team plant route fleet shift grade batch lane zone tier"
    long = " ".join(f"revenue by {word}" for word in words.split())
    first = extract_requirements(long)
    assert first == extract_requirements(long)
    assert len(first) == MAX_REQUIREMENTS
