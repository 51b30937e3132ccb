"""Analysis requirements from a task's text: what a data answer has to cover.

The default ``requirement_extractor`` of the data-analysis protocol. It reads the run's
effective task (the session intent with its follow-up or refinement, never a bare "try
again") and names each thing the user asked for as ``<kind>:<value>``:

* ``metric:`` -- what is measured: ``metric:revenue``, ``metric:orders``, ``metric:aov``;
* ``dimension:`` -- a breakdown: "by region", "per month", "for each product", "monthly",
  按地区, 各月 → ``dimension:region``, ``dimension:month``;
* ``time:`` -- the window: ``time:last-quarter``, ``time:last-30-days``, ``time:2026-q3``,
  ``time:2025``, ``time:2026-03``, ``time:ytd``, ``time:since-2025-01-01``;
* ``filter:`` -- a restriction: "completed orders" → ``filter:order=completed``,
  "excluding refunds" → ``filter:exclude-refunds``, "where channel is online" →
  ``filter:channel=online``, "in the West region" → ``filter:region=west``;
* ``compare:`` -- a comparison: ``compare:year-over-year``, ``compare:previous-period``;
* ``limit:`` -- a ranking cut: "top 5" → ``limit:top-5``.

Pure and deterministic: the same text gives the same ids in the same order (the kinds
in the order above, each in the order first mentioned), at most ``MAX_REQUIREMENTS``.
An id holds no whitespace, comma or semicolon, so it reads back whole from a list such as
the protocol's "Still missing: …" line, and it is a plain JSON key for
``analysis_requirements_commit``. The vocabulary is fixed (English and common Chinese
phrasing); a host with its own semantic layer passes its own extractor.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

__all__ = ["MAX_REQUIREMENTS", "extract_requirements"]

MAX_REQUIREMENTS = 12
"""Past this a text is not a list of requirements but a document; the rest is left to
the model rather than turned into pending items it must answer one by one."""

_I = re.IGNORECASE

# --------------------------------------------------------------------------- metrics

_METRICS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(pattern, _I))
    for name, pattern in (
        ("revenue", r"\brevenues?\b|\bturnover\b|销售额|营收|收入"),
        ("sales", r"\bsales\b(?!\s+(?:pitch|team|call|deck)s?\b)"),
        ("profit", r"\bprofits?\b|利润"),
        ("margin", r"\bmargins?\b|毛利率"),
        (
            "orders",
            r"\b(?:number|count)\s+of\s+orders\b|\bhow\s+many\s+orders\b"
            r"|\border\s+(?:count|volume)s?\b|订单量|订单数",
        ),
        (
            "customers",
            r"\b(?:number|count)\s+of\s+customers\b|\bhow\s+many\s+customers\b"
            r"|\bcustomer\s+count\b|客户数|用户数",
        ),
        ("aov", r"\baverage\s+order\s+values?\b|\baov\b|客单价"),
        ("units", r"\bunits?\s+sold\b|\bquantit(?:y|ies)\s+sold\b|销量"),
        ("conversion-rate", r"\bconversion(?:\s+rates?)?\b|转化率"),
        ("retention", r"\bretention\b|留存"),
        ("churn", r"\bchurn\b|流失率"),
    )
)

# --------------------------------------------------------------------------- dimensions

_DIMENSION_WORDS: dict[str, str] = {
    "monthly": "month",
    "weekly": "week",
    "daily": "day",
    "quarterly": "quarter",
    "yearly": "year",
    "annual": "year",
    "annually": "year",
}
_ZH_DIMENSIONS: dict[str, str] = {
    "大区": "region",
    "地区": "region",
    "区域": "region",
    "月份": "month",
    "月": "month",
    "季度": "quarter",
    "周": "week",
    "年": "year",
    "天": "day",
    "日": "day",
    "产品": "product",
    "品类": "category",
    "类别": "category",
    "客户": "customer",
    "渠道": "channel",
    "城市": "city",
    "省份": "province",
    "国家": "country",
    "门店": "store",
}
# Words after "by" that never name a breakdown ("by the way", "by last quarter").
_NOT_DIMENSIONS = frozenset(
    {"a", "an", "the", "each", "every", "last", "this", "next", "previous", "far", "then"}
    | {"now", "default", "hand", "name", "way", "itself", "themselves", "me", "us", "it"}
    | {"of", "cent", "about", "around", "roughly", "more", "less", "much", "far"}
)
# "by" after these orders, explains or measures a change; it breaks nothing down.
_NOT_BREAKDOWN_AFTER = frozenset(
    {"sort", "sorted", "order", "ordered", "rank", "ranked", "driven", "caused", "led"}
    | {"affected", "followed", "grew", "grow", "rose", "fell", "increased", "decreased"}
    | {"dropped", "divided", "multiplied"}
)
_BREAKDOWN = re.compile(
    r"\b(?:by|per|for\s+(?:each|every)|across|each)\s+(?:the\s+|each\s+)?"
    r"(?P<first>[a-z][a-z-]*)(?P<more>(?:\s+(?:&|and)\s+[a-z][a-z-]*){0,3})",
    _I,
)
# "top 5 products": the ranked rows are a breakdown too.
_RANKED = re.compile(r"\b(?:top|bottom)\s+\d{1,4}\s+(?P<first>[a-z][a-z-]*)", _I)
# "by revenue" after a ranking orders rows by a metric; it does not break them down.
_METRIC_WORDS = frozenset(
    {"revenue", "sales", "profit", "margin", "turnover", "value", "volume", "count", "total"}
)
_GRAIN = re.compile(r"\b(?:monthly|weekly|daily|quarterly|yearly|annual(?:ly)?)\b", _I)
_ZH_BREAKDOWN = re.compile(
    r"(?:按|按照|分|各|每个?)(?P<dim>" + "|".join(_ZH_DIMENSIONS) + r")",
)

# --------------------------------------------------------------------------- time

_UNITS = r"(?P<unit>day|week|month|quarter|year)"
_QUARTER_YEAR = re.compile(r"\bq(?P<q>[1-4])\s*(?:of\s+|/\s*|-\s*)?(?P<year>(?:19|20)\d\d)\b", _I)
_YEAR_QUARTER = re.compile(r"\b(?P<year>(?:19|20)\d\d)\s*[-/ ]?\s*q(?P<q>[1-4])\b", _I)
_ZH_YEAR_QUARTER = re.compile(r"(?P<year>(?:19|20)\d\d)年?第?(?P<q>[1-4一二三四])季度")
_DATE = r"(?:19|20)\d\d-\d\d-\d\d"
_BETWEEN = re.compile(
    rf"\b(?:between|from)\s+(?P<start>{_DATE})\s+(?:and|to|until|through)\s+(?P<end>{_DATE})\b",
    _I,
)
_SINCE = re.compile(rf"\b(?P<edge>since|after|before|until)\s+(?P<date>{_DATE})\b", _I)
_LAST_N = re.compile(rf"\b(?:last|past|previous)\s+(?P<n>\d{{1,4}})\s+{_UNITS}s?\b", _I)
_RELATIVE = re.compile(rf"\b(?P<rel>last|past|previous|this|current|next)\s+{_UNITS}\b", _I)
_TO_DATE = re.compile(r"\b(?:(?P<unit>year|quarter|month)[\s-]to[\s-]date|(?P<abbr>[ymq]td))\b", _I)
_DAYS = re.compile(r"\b(?P<day>yesterday|today)\b", _I)
_MONTHS: tuple[str, ...] = (
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
)
_MONTH_YEAR = re.compile(
    r"\b(?P<month>"
    + "|".join(m.capitalize() for m in _MONTHS)
    + r"|"
    + "|".join(_MONTHS)
    + r")\s+(?P<year>(?:19|20)\d\d)\b"
)
_YEAR = re.compile(r"(?<![\d-])(?P<year>(?:19|20)\d\d)(?![\d-])")
_ZH_RELATIVE: dict[str, str] = {
    "上个季度": "last-quarter",
    "上季度": "last-quarter",
    "本季度": "this-quarter",
    "上个月": "last-month",
    "上月": "last-month",
    "本月": "this-month",
    "上周": "last-week",
    "本周": "this-week",
    "去年": "last-year",
    "今年": "this-year",
    "昨天": "yesterday",
    "今天": "today",
}
_ZH_UNITS = {"天": "day", "周": "week", "个月": "month", "月": "month", "年": "year"}
_ZH_LAST_N = re.compile(r"(?:最近|过去|近)(?P<n>\d{1,4})(?P<unit>个月|天|周|月|年)")
_ZH_NUMERALS = {"一": "1", "二": "2", "三": "3", "四": "4"}

# --------------------------------------------------------------------------- filters

_STATUS_FILTER = re.compile(
    r"\b(?P<value>completed|cancell?ed|refunded|active|inactive|paid|unpaid|pending"
    r"|shipped|delivered|returned|new|returning)\s+"
    r"(?P<noun>orders?|customers?|users?|items?|transactions?|payments?|subscriptions?)\b",
    _I,
)
_EXCLUDE = re.compile(
    r"\b(?:excluding|exclude|except(?:\s+for)?|without|not\s+including)\s+(?:the\s+|any\s+)?"
    r"(?P<what>[a-z][a-z-]*(?:\s+(?!and\b|or\b|in\b|for\b|by\b|from\b|with\b|last\b|this\b)"
    r"[a-z][a-z-]*)?)",
    _I,
)
_WHERE = re.compile(
    r"\bwhere\s+(?:the\s+)?(?P<field>[a-z][a-z_-]*)\s+(?:is|=|==|equals)\s+"
    r"['\"]?(?P<value>[\w.-]+)",
    _I,
)
# Case-sensitive: a proper name before the kind of place or group it is.
_NAMED = re.compile(
    r"\b(?:in|for|from|within)\s+(?:the\s+)?(?P<value>[A-Z][A-Za-z]+(?:\s+[A-Z][A-Za-z]+)?)"
    r"\s+(?P<field>region|country|city|state|province|store|segment|channel|category|market)\b"
)

# --------------------------------------------------------------------------- comparisons

_COMPARES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(pattern, _I))
    for name, pattern in (
        ("year-over-year", r"\byear[\s-]over[\s-]year\b|\byoy\b|同比"),
        ("quarter-over-quarter", r"\bquarter[\s-]over[\s-]quarter\b|\bqoq\b"),
        ("month-over-month", r"\bmonth[\s-]over[\s-]month\b"),
        (
            "previous-period",
            r"\b(?:compared?\s+(?:to|with)|vs\.?|versus)\s+(?:the\s+)?(?:previous|prior|last)\s+"
            r"(?:period|day|week|month|quarter|year)\b|环比",
        ),
    )
)
_COMPARES_BY_NAME = dict(_COMPARES)
_TOP = re.compile(r"\b(?P<end>top|bottom)\s+(?P<n>\d{1,4})\b", _I)
_ZH_TOP = re.compile(r"前(?P<n>\d{1,4})(?:名|个|位)?")


def extract_requirements(text: str) -> tuple[str, ...]:
    """The requirement ids of ``text``, kinds in a fixed order, each in order of mention."""
    found: list[str] = []
    for kind in _KINDS:
        for value in kind(text):
            if value not in found:
                found.append(value)
    return tuple(found[:MAX_REQUIREMENTS])


def _metrics(text: str) -> Iterator[str]:
    hits = [(m.start(), name) for name, pattern in _METRICS if (m := pattern.search(text))]
    for _, name in sorted(hits):
        yield f"metric:{name}"


def _dimensions(text: str) -> Iterator[str]:
    hits: list[tuple[int, str]] = []
    for match in _BREAKDOWN.finditer(text):
        before = text[: match.start()].split()
        if before and before[-1].lower() in _NOT_BREAKDOWN_AFTER:
            continue
        words = [match["first"], *re.split(r"\s+(?:&|and)\s+", match["more"])[1:]]
        for offset, word in enumerate(words):
            name = _singular(word.lower())
            if not name or name in _NOT_DIMENSIONS or name in _METRIC_WORDS:
                break
            hits.append((match.start() + offset, _DIMENSION_WORDS.get(name, name)))
    hits += [(m.start(), _singular(m["first"].lower())) for m in _RANKED.finditer(text)]
    hits += [(m.start(), _DIMENSION_WORDS[m[0].lower()]) for m in _GRAIN.finditer(text)]
    hits += [(m.start(), _ZH_DIMENSIONS[m["dim"]]) for m in _ZH_BREAKDOWN.finditer(text)]
    for _, name in sorted(hits):
        yield f"dimension:{_slug(name)}"


def _time_windows(text: str) -> Iterator[str]:
    hits: list[tuple[int, str]] = []
    # "compared to the previous year" is a comparison, not a second window.
    rest = _COMPARES_BY_NAME["previous-period"].sub(lambda m: " " * len(m[0]), text)

    def take(pattern: re.Pattern[str], name: Callable[[re.Match[str]], str]) -> None:
        # Each window is taken once: its span is blanked so "2026-Q3" is not also 2026.
        nonlocal rest
        for match in pattern.finditer(rest):
            hits.append((match.start(), name(match)))
        rest = pattern.sub(lambda m: " " * len(m[0]), rest)

    take(_BETWEEN, lambda m: f"{m['start']}..{m['end']}")
    take(_SINCE, lambda m: f"{m['edge'].lower()}-{m['date']}")
    take(_QUARTER_YEAR, lambda m: f"{m['year']}-q{m['q']}")
    take(_YEAR_QUARTER, lambda m: f"{m['year']}-q{m['q']}")
    take(_ZH_YEAR_QUARTER, lambda m: f"{m['year']}-q{_ZH_NUMERALS.get(m['q'], m['q'])}")
    take(_MONTH_YEAR, lambda m: f"{m['year']}-{_MONTHS.index(m['month'].lower()) + 1:02d}")
    take(_LAST_N, lambda m: f"last-{int(m['n'])}-{m['unit'].lower()}s")
    take(_RELATIVE, lambda m: f"{_relative(m['rel'])}-{m['unit'].lower()}")
    take(_TO_DATE, lambda m: (m["abbr"] or m["unit"][0] + "td").lower())
    take(_DAYS, lambda m: m["day"].lower())
    take(
        _ZH_LAST_N,
        lambda m: f"last-{int(m['n'])}-{_ZH_UNITS[m['unit']]}s",
    )
    for word, name in _ZH_RELATIVE.items():
        take(re.compile(word), lambda _m, name=name: name)
    take(_YEAR, lambda m: m["year"])
    for _, name in sorted(hits):
        yield f"time:{_slug(name)}"


def _filters(text: str) -> Iterator[str]:
    hits: list[tuple[int, str]] = []
    for m in _STATUS_FILTER.finditer(text):
        value = "cancelled" if m["value"].lower() == "canceled" else m["value"].lower()
        hits.append((m.start(), f"{_singular(m['noun'].lower())}={value}"))
    hits += [(m.start(), f"exclude-{m['what']}") for m in _EXCLUDE.finditer(text)]
    hits += [(m.start(), f"{m['field']}={m['value']}") for m in _WHERE.finditer(text)]
    hits += [(m.start(), f"{m['field']}={m['value']}") for m in _NAMED.finditer(text)]
    for _, name in sorted(hits):
        yield f"filter:{_slug(name)}"


def _comparisons(text: str) -> Iterator[str]:
    hits = [(m.start(), name) for name, pattern in _COMPARES if (m := pattern.search(text))]
    for _, name in sorted(hits):
        yield f"compare:{name}"


def _limits(text: str) -> Iterator[str]:
    hits = [(m.start(), f"{m['end'].lower()}-{int(m['n'])}") for m in _TOP.finditer(text)]
    hits += [(m.start(), f"top-{int(m['n'])}") for m in _ZH_TOP.finditer(text)]
    for _, name in sorted(hits):
        yield f"limit:{name}"


_KINDS: tuple[Callable[[str], Iterator[str]], ...] = (
    _metrics,
    _dimensions,
    _time_windows,
    _filters,
    _comparisons,
    _limits,
)


def _relative(word: str) -> str:
    word = word.lower()
    return {"past": "last", "previous": "last", "current": "this"}.get(word, word)


def _singular(word: str) -> str:
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith("s") and not word.endswith("ss") and len(word) > 3:
        return word[:-1]
    return word


def _slug(value: str) -> str:
    """Lower case; runs of anything but word characters, ``=`` and ``.`` become ``-``."""
    return re.sub(r"[^\w=.]+", "-", value.lower(), flags=re.UNICODE).strip("-")
