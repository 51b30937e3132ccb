"""A deterministic sample sales database for the data-analysis agent.

Five related tables (``regions``, ``customers``, ``products``, ``orders``,
``order_items``) generated with ``random.Random(seed)``, so two builds with the same
seed hold identical data. The data carries the traps a careless analysis falls into:

* about a fifth of orders are ``cancelled`` or ``refunded`` (more of them in the West),
  so forgetting the status filter inflates revenue visibly and reorders regions;
* line items carry the price actually charged, which is below the product's list price
  for discounted lines, so pricing from ``products.unit_price`` overstates revenue;
* order volume grows over time, so quarters are not interchangeable.

Revenue is defined as ``sum(order_items.quantity * order_items.unit_price)`` over the
items of orders whose ``status = 'completed'``. The definition is stored in the table
comments, which ``inspect_schema`` returns.
"""

from __future__ import annotations

import bisect
import csv
import os
import random
import tempfile
from datetime import date, timedelta
from decimal import Decimal
from pathlib import Path

import duckdb

from ._duck import (
    DEFAULT_MEMORY_LIMIT,
    DEFAULT_THREADS,
    connect_read_only,
    is_config_conflict,
)

__all__ = [
    "DEFAULT_SEED",
    "REVENUE_DEFINITION",
    "SAMPLE_DESCRIPTION",
    "SAMPLE_VERSION",
    "build_sample_database",
    "generate_sample",
]

SAMPLE_VERSION = 1
DEFAULT_SEED = 7

FIRST_ORDER_DATE = date(2025, 1, 1)
LAST_ORDER_DATE = date(2026, 9, 30)

REVENUE_DEFINITION = (
    "Revenue = sum(order_items.quantity * order_items.unit_price) over the items of "
    "orders with status = 'completed'. Cancelled and refunded orders earn no revenue, "
    "and order_items.unit_price (the price charged) is not products.unit_price "
    "(the list price)."
)

SAMPLE_DESCRIPTION = (
    "Sample sales database: regions, customers, products, orders "
    f"({FIRST_ORDER_DATE.isoformat()} to {LAST_ORDER_DATE.isoformat()}) and order_items. "
    + REVENUE_DEFINITION
)

_REGIONS = ["North", "South", "East", "West", "Central"]
_REGION_WEIGHTS = [28, 22, 20, 18, 12]
# Share of orders per region that end cancelled / refunded; the rest complete.
_CANCEL_RATE = {"North": 0.10, "South": 0.11, "East": 0.09, "West": 0.22, "Central": 0.12}
_REFUND_RATE = {"North": 0.05, "South": 0.06, "East": 0.05, "West": 0.08, "Central": 0.06}

_CATEGORIES = {
    "Electronics": (40, 400),
    "Home": (15, 180),
    "Office": (5, 90),
    "Outdoor": (20, 260),
    "Toys": (8, 70),
}
_ADJECTIVES = ["Compact", "Deluxe", "Classic", "Smart", "Rugged", "Eco", "Pro", "Mini"]
_NOUNS = {
    "Electronics": ["Headphones", "Speaker", "Charger", "Monitor", "Keyboard", "Camera"],
    "Home": ["Lamp", "Kettle", "Blanket", "Vase", "Chair", "Rug"],
    "Office": ["Notebook", "Stapler", "Desk Organizer", "Pen Set", "Binder", "Planner"],
    "Outdoor": ["Tent", "Backpack", "Lantern", "Cooler", "Hammock", "Bike Lock"],
    "Toys": ["Puzzle", "Robot Kit", "Board Game", "Kite", "Plush Bear", "Blocks"],
}
_FIRST_NAMES = [
    "Ada", "Ben", "Chloe", "Dev", "Elena", "Farid", "Grace", "Hiro", "Ines", "Jonas",
    "Kemi", "Luca", "Maya", "Nils", "Olga", "Priya", "Quinn", "Rosa", "Sam", "Tariq",
]  # fmt: skip
_LAST_NAMES = [
    "Adler", "Brown", "Costa", "Dubois", "Eriksen", "Fischer", "Garcia", "Hansen",
    "Ito", "Jensen", "Kowalski", "Larsen", "Moreau", "Nakamura", "Okafor", "Petrov",
    "Quispe", "Rossi", "Silva", "Tanaka", "Umarov", "Varga", "Weber", "Yilmaz",
]  # fmt: skip

_N_CUSTOMERS = 500
_N_ORDERS = 5000

_COMMENTS: dict[str, tuple[str, dict[str, str]]] = {
    "regions": (
        "Sales regions. One row per region.",
        {"region_id": "Primary key.", "name": "Region name."},
    ),
    "customers": (
        "Customers. One row per customer; each belongs to exactly one region.",
        {
            "customer_id": "Primary key.",
            "name": "Customer name (not unique).",
            "region_id": "References regions.region_id.",
            "signup_date": "Date the customer registered; before their first order.",
        },
    ),
    "products": (
        "Product catalogue. unit_price is the current list price, not the price charged.",
        {
            "product_id": "Primary key.",
            "name": "Product name.",
            "category": "One of Electronics, Home, Office, Outdoor, Toys.",
            "unit_price": "List price. Use order_items.unit_price for revenue.",
        },
    ),
    "orders": (
        "Orders. One row per order. status is 'completed', 'cancelled' or 'refunded'; "
        "only completed orders count towards revenue. " + REVENUE_DEFINITION,
        {
            "order_id": "Primary key.",
            "customer_id": "References customers.customer_id.",
            "order_date": "Date the order was placed.",
            "status": "'completed', 'cancelled' or 'refunded'. Revenue counts 'completed' only.",
        },
    ),
    "order_items": (
        "Order lines. One row per (order_id, product_id). " + REVENUE_DEFINITION,
        {
            "order_id": "References orders.order_id.",
            "product_id": "References products.product_id.",
            "quantity": "Units ordered (positive).",
            "unit_price": "Price charged per unit, after any line discount.",
        },
    ),
}

_DDL = {
    "regions": "region_id INTEGER PRIMARY KEY, name VARCHAR NOT NULL",
    "customers": (
        "customer_id INTEGER PRIMARY KEY, name VARCHAR NOT NULL, "
        "region_id INTEGER NOT NULL, signup_date DATE NOT NULL"
    ),
    "products": (
        "product_id INTEGER PRIMARY KEY, name VARCHAR NOT NULL, "
        "category VARCHAR NOT NULL, unit_price DECIMAL(10, 2) NOT NULL"
    ),
    "orders": (
        "order_id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL, "
        "order_date DATE NOT NULL, status VARCHAR NOT NULL"
    ),
    "order_items": (
        "order_id INTEGER NOT NULL, product_id INTEGER NOT NULL, "
        "quantity INTEGER NOT NULL, unit_price DECIMAL(10, 2) NOT NULL, "
        "PRIMARY KEY (order_id, product_id)"
    ),
}

TABLES = tuple(_DDL)


def _provenance(seed: int) -> str:
    return f"Generated by plangate sample v{SAMPLE_VERSION}, seed {seed}."


def _money(value: float) -> Decimal:
    return Decimal(f"{value:.2f}")


def generate_sample(seed: int = DEFAULT_SEED) -> dict[str, list[tuple]]:
    """Generate the sample tables as lists of row tuples, deterministically."""
    rng = random.Random(seed)
    regions = [(i + 1, name) for i, name in enumerate(_REGIONS)]

    products: list[tuple] = []
    for category, (low, high) in _CATEGORIES.items():
        names = rng.sample([f"{a} {n}" for a in _ADJECTIVES for n in _NOUNS[category]], 8)
        for name in names:
            price = _money(rng.uniform(low, high))
            products.append((len(products) + 1, name, category, price))

    signup_start = date(2023, 6, 1)
    signup_span = (date(2026, 6, 30) - signup_start).days
    signups = sorted(
        # The first 40 customers signed up before the first order date.
        signup_start + timedelta(days=rng.randrange(0, 500 if i < 40 else signup_span))
        for i in range(_N_CUSTOMERS)
    )
    customers = [
        (
            i + 1,
            f"{rng.choice(_FIRST_NAMES)} {rng.choice(_LAST_NAMES)}",
            rng.choices(range(1, len(_REGIONS) + 1), weights=_REGION_WEIGHTS)[0],
            signup,
        )
        for i, signup in enumerate(signups)
    ]

    # Order dates: volume grows roughly linearly over the period.
    span = (LAST_ORDER_DATE - FIRST_ORDER_DATE).days
    day_weights = [1.0 + 1.5 * d / span for d in range(span + 1)]
    order_dates = sorted(
        FIRST_ORDER_DATE + timedelta(days=d)
        for d in rng.choices(range(span + 1), weights=day_weights, k=_N_ORDERS)
    )

    orders: list[tuple] = []
    items: list[tuple] = []
    for order_id, order_date in enumerate(order_dates, start=1):
        # Only customers who had signed up by the order date can order.
        eligible = bisect.bisect_right(signups, order_date)
        customer = customers[rng.randrange(eligible)]
        region = _REGIONS[customer[2] - 1]
        roll = rng.random()
        if roll < _CANCEL_RATE[region]:
            status = "cancelled"
        elif roll < _CANCEL_RATE[region] + _REFUND_RATE[region]:
            status = "refunded"
        else:
            status = "completed"
        orders.append((order_id, customer[0], order_date, status))
        n_lines = rng.choices([1, 2, 3, 4, 5], weights=[30, 30, 20, 12, 8])[0]
        for product in rng.sample(products, n_lines):
            quantity = rng.choices([1, 2, 3, 4, 5, 6], weights=[40, 25, 15, 10, 6, 4])[0]
            price = product[3]
            if rng.random() < 0.15:
                price = (price * Decimal(1 - rng.choice([5, 10, 15, 20, 25]) / 100)).quantize(
                    Decimal("0.01")
                )
            items.append((order_id, product[0], quantity, price))

    return {
        "regions": regions,
        "customers": customers,
        "products": products,
        "orders": orders,
        "order_items": items,
    }


def _is_current(path: Path, seed: int, memory_limit: str, threads: int) -> bool:
    """Whether ``path`` holds a complete sample database of this version and seed."""
    try:
        with connect_read_only(path, memory_limit=memory_limit, threads=threads) as conn:
            found = dict(
                conn.execute(
                    "SELECT table_name, comment FROM duckdb_tables() "
                    "WHERE schema_name = 'main' AND NOT internal"
                ).fetchall()
            )
    except duckdb.Error as err:
        # Open in this process with other limits: a catalog checked it when opening
        # it, and replacing a file under an open connection would corrupt its reads.
        # Opening it for the catalog then reports the conflict.
        return is_config_conflict(err)
    return set(TABLES) <= set(found) and _provenance(seed) in (found.get("orders") or "")


def _sql_text(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _write(path: Path, seed: int) -> None:
    data = generate_sample(seed)
    with (
        tempfile.TemporaryDirectory(prefix="plangate-sample-") as tmp,
        duckdb.connect(str(path)) as conn,
    ):
        for table, ddl in _DDL.items():
            conn.execute(f"CREATE TABLE {table} ({ddl})")
            csv_path = Path(tmp) / f"{table}.csv"
            with csv_path.open("w", newline="") as fh:
                csv.writer(fh).writerows(data[table])
            conn.execute(f"COPY {table} FROM {_sql_text(str(csv_path))} (HEADER false)")
            comment, column_comments = _COMMENTS[table]
            if table == "orders":
                comment = f"{comment} {_provenance(seed)}"
            conn.execute(f"COMMENT ON TABLE {table} IS {_sql_text(comment)}")
            for column, text in column_comments.items():
                conn.execute(f"COMMENT ON COLUMN {table}.{column} IS {_sql_text(text)}")
        conn.execute("CHECKPOINT")


def build_sample_database(
    path: str | os.PathLike[str],
    seed: int = DEFAULT_SEED,
    *,
    memory_limit: str = DEFAULT_MEMORY_LIMIT,
    threads: int = DEFAULT_THREADS,
) -> Path:
    """Write the sample database to ``path`` (a ``.duckdb`` file) and return the path.

    Idempotent: an existing complete database of the same version and seed is kept;
    a missing, partial or outdated one is rebuilt. The file is written under a
    temporary name and moved into place, so readers never see a half-built file.
    ``memory_limit`` and ``threads``: the limits the catalog that will read the file
    opens it with (DuckDB wants one configuration per file within a process).
    """
    target = Path(path).expanduser().resolve()
    if target.exists() and _is_current(target, seed, memory_limit, threads):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
    for leftover in (partial, partial.with_name(partial.name + ".wal")):
        leftover.unlink(missing_ok=True)
    try:
        _write(partial, seed)
        os.replace(partial, target)
    finally:
        for leftover in (partial, partial.with_name(partial.name + ".wal")):
            leftover.unlink(missing_ok=True)
    return target
