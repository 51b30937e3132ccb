"""The data layer: sample database, catalog, SQL guard and the data-analysis tools."""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections import defaultdict
from datetime import date
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest

from plangate.data import (
    TOOL_NAMES,
    DataCatalog,
    DataError,
    DataTools,
    SqlGuardError,
    build_sample_database,
    data_adk_tools,
    validate_readonly_sql,
)
from plangate.data.catalog import DEFAULT_MEMORY_LIMIT, DEFAULT_THREADS
from plangate.data.sample import generate_sample
from plangate.data.sql_guard import (
    SQL_FORBIDDEN_FUNCTION,
    SQL_MULTIPLE_STATEMENTS,
    SQL_NOT_READ_ONLY,
    SQL_PARSE_ERROR,
    SQL_UNKNOWN_TABLE,
)
from plangate.data.tools import canonical_json
from plangate.policy.effects import Effect, effect_of

SAMPLE_TABLES = ("customers", "order_items", "orders", "products", "regions")

REVENUE_BY_REGION = """
SELECT r.name AS region, sum(oi.quantity * oi.unit_price) AS revenue
FROM order_items oi
JOIN orders o ON o.order_id = oi.order_id
JOIN customers c ON c.customer_id = o.customer_id
JOIN regions r ON r.region_id = c.region_id
WHERE o.status = 'completed' {extra}
GROUP BY r.name
ORDER BY r.name
"""
Q2_2026 = "AND o.order_date >= DATE '2026-04-01' AND o.order_date < DATE '2026-07-01'"


def error_code(result: dict) -> str | None:
    error = result.get("error")
    return error.split(":", 1)[0] if error else None


@pytest.fixture(scope="module")
def sample_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("sample")


@pytest.fixture(scope="module")
def catalog(sample_dir: Path):
    with DataCatalog(cache_dir=sample_dir) as cat:
        yield cat


@pytest.fixture
def tools(catalog: DataCatalog) -> DataTools:
    return DataTools(catalog)


# -- sample dataset ---------------------------------------------------------------------


def _revenue_checksum(path: Path) -> str:
    with duckdb.connect(str(path), read_only=True) as conn:
        rows = conn.execute(REVENUE_BY_REGION.format(extra="")).fetchall()
    return hashlib.sha256(repr(rows).encode()).hexdigest()


def test_sample_is_deterministic(tmp_path: Path) -> None:
    first = build_sample_database(tmp_path / "a" / "sample.duckdb")
    second = build_sample_database(tmp_path / "b" / "sample.duckdb")
    assert _revenue_checksum(first) == _revenue_checksum(second)
    assert generate_sample(7) == generate_sample(7)
    assert generate_sample(7) != generate_sample(8)


def test_sample_build_is_fast_idempotent_and_repairs(tmp_path: Path) -> None:
    path = tmp_path / "sample.duckdb"
    # "Fast" counts the CPU the build spends (~0.5 s here), all its threads included, not
    # the wall clock: on a loaded CI machine the wait for a core alone took over 2 s.
    started = time.process_time()
    build_sample_database(path)
    assert time.process_time() - started < 2.0
    mtime = path.stat().st_mtime_ns
    assert build_sample_database(path) == path.resolve()
    assert path.stat().st_mtime_ns == mtime  # kept, not rebuilt
    path.write_bytes(b"not a database")
    build_sample_database(path)
    with duckdb.connect(str(path), read_only=True) as conn:
        assert conn.execute("SELECT count(*) FROM orders").fetchone() == (5000,)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sample.duckdb"]


def test_sample_shape_and_traps() -> None:
    data = generate_sample()
    assert len(data["regions"]) == 5
    assert len(data["customers"]) == 500
    assert len(data["products"]) == 40
    assert len(data["orders"]) == 5000
    dates = [o[2] for o in data["orders"]]
    assert min(dates) >= date(2025, 1, 1) and max(dates) <= date(2026, 9, 30)
    statuses = {o[3] for o in data["orders"]}
    assert statuses == {"completed", "cancelled", "refunded"}
    signup = {c[0]: c[3] for c in data["customers"]}
    assert all(signup[o[1]] <= o[2] for o in data["orders"])
    list_price = {p[0]: p[3] for p in data["products"]}
    discounted = [i for i in data["order_items"] if i[3] < list_price[i[1]]]
    assert len(discounted) > 500  # pricing from products.unit_price is visibly wrong


def test_revenue_definition_two_ways_agree(tools: DataTools) -> None:
    joined = tools.run_sql_readonly("sample", REVENUE_BY_REGION.format(extra=""))
    total_joined = sum(row["revenue"] for row in joined["rows"])
    semi = tools.run_sql_readonly(
        "sample",
        "SELECT sum(quantity * unit_price) AS revenue FROM order_items "
        "WHERE order_id IN (SELECT order_id FROM orders WHERE status = 'completed')",
    )
    assert semi["rows"][0]["revenue"] == pytest.approx(total_joined, abs=0.005)

    # And straight from the generator, without SQL.
    data = generate_sample()
    completed = {o[0] for o in data["orders"] if o[3] == "completed"}
    python_total = sum(q * p for oid, _, q, p in data["order_items"] if oid in completed)
    assert Decimal(str(semi["rows"][0]["revenue"])) == python_total

    # The traps change the answer visibly.
    everything = tools.run_sql_readonly(
        "sample", "SELECT sum(quantity * unit_price) AS revenue FROM order_items"
    )
    assert everything["rows"][0]["revenue"] > 1.1 * total_joined
    list_priced = tools.run_sql_readonly(
        "sample",
        "SELECT sum(oi.quantity * p.unit_price) AS revenue FROM order_items oi "
        "JOIN products p ON p.product_id = oi.product_id "
        "JOIN orders o ON o.order_id = oi.order_id WHERE o.status = 'completed'",
    )
    assert list_priced["rows"][0]["revenue"] > total_joined + 1000


def test_revenue_definition_is_documented(tools: DataTools) -> None:
    schema = tools.inspect_schema("sample", "orders")
    table = schema["tables"][0]
    assert "status = 'completed'" in table["comment"]
    assert "order_items.quantity * order_items.unit_price" in table["comment"]
    assert "completed" in schema["description"]
    columns = {c["name"]: c for c in table["columns"]}
    assert columns["order_date"]["type"] == "DATE"
    assert "completed" in columns["status"]["comment"]


# -- SQL guard --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sql", "code"),
    [
        ("SELECT 1; SELECT 2", SQL_MULTIPLE_STATEMENTS),
        ("SELECT * FROM orders; DROP TABLE orders", SQL_MULTIPLE_STATEMENTS),
        ("DROP TABLE orders", SQL_NOT_READ_ONLY),
        ("CREATE TABLE x AS SELECT * FROM orders", SQL_NOT_READ_ONLY),
        ("ALTER TABLE orders ADD COLUMN x INT", SQL_NOT_READ_ONLY),
        ("INSERT INTO orders VALUES (1, 1, DATE '2025-01-01', 'completed')", SQL_NOT_READ_ONLY),
        ("UPDATE orders SET status = 'completed'", SQL_NOT_READ_ONLY),
        ("DELETE FROM orders", SQL_NOT_READ_ONLY),
        ("SELECT * INTO copy_of_orders FROM orders", SQL_NOT_READ_ONLY),
        ("ATTACH '/tmp/other.duckdb' AS other", SQL_NOT_READ_ONLY),
        ("DETACH other", SQL_NOT_READ_ONLY),
        ("COPY orders TO '/tmp/orders.csv'", SQL_NOT_READ_ONLY),
        ("COPY (SELECT * FROM orders) TO '/tmp/orders.csv'", SQL_NOT_READ_ONLY),
        ("PRAGMA table_info('orders')", SQL_NOT_READ_ONLY),
        ("SET threads = 1", SQL_NOT_READ_ONLY),
        ("INSTALL httpfs", SQL_NOT_READ_ONLY),
        ("LOAD httpfs", SQL_NOT_READ_ONLY),
        ("EXPORT DATABASE '/tmp/dump'", SQL_NOT_READ_ONLY),
        ("CHECKPOINT", SQL_NOT_READ_ONLY),
        ("DESCRIBE orders", SQL_NOT_READ_ONLY),
        ("SELECT * FROM read_csv('/etc/passwd')", SQL_FORBIDDEN_FUNCTION),
        ("SELECT * FROM read_csv_auto('/etc/passwd')", SQL_FORBIDDEN_FUNCTION),
        ("SELECT * FROM read_parquet('/tmp/x.parquet')", SQL_FORBIDDEN_FUNCTION),
        ("SELECT * FROM read_json_auto('/tmp/x.json')", SQL_FORBIDDEN_FUNCTION),
        ("SELECT read_text('/etc/passwd')", SQL_FORBIDDEN_FUNCTION),
        ("SELECT * FROM glob('/etc/*')", SQL_FORBIDDEN_FUNCTION),
        ("SELECT * FROM query('DROP TABLE orders')", SQL_FORBIDDEN_FUNCTION),
        ("SELECT * FROM '/etc/passwd'", SQL_FORBIDDEN_FUNCTION),
        ('SELECT * FROM "orders.csv"', SQL_FORBIDDEN_FUNCTION),
        ("SELECT * FROM duckdb_settings()", SQL_FORBIDDEN_FUNCTION),
        (
            "SELECT o.* FROM orders o JOIN read_csv('/etc/passwd') p ON true",
            SQL_FORBIDDEN_FUNCTION,
        ),
        ("SELECT * FROM secrets", SQL_UNKNOWN_TABLE),
        ("SELECT * FROM information_schema.tables", SQL_UNKNOWN_TABLE),
        ("SELECT * FROM other.main.orders", SQL_UNKNOWN_TABLE),
        ("SELECT FROM WHERE", SQL_PARSE_ERROR),
        ("", SQL_PARSE_ERROR),
        (" ; ", SQL_PARSE_ERROR),
    ],
)
def test_guard_rejects(sql: str, code: str) -> None:
    with pytest.raises(SqlGuardError) as info:
        validate_readonly_sql(sql, known_tables=SAMPLE_TABLES)
    assert info.value.code == code
    assert str(info.value).startswith(f"{code}: ")


@pytest.mark.parametrize(
    ("sql", "tables"),
    [
        ("SELECT count(*) FROM orders", ("orders",)),
        ("select * from ORDERS where status = 'completed';", ("orders",)),
        ("FROM orders LIMIT 3", ("orders",)),
        ("SELECT * FROM main.orders", ("orders",)),
        (
            "WITH done AS (SELECT * FROM orders WHERE status = 'completed') "
            "SELECT count(*) FROM done JOIN customers USING (customer_id)",
            ("customers", "orders"),
        ),
        ("SELECT region_id FROM regions UNION ALL SELECT region_id FROM customers", None),
        ("SELECT * FROM range(3)", ()),
        (
            "SELECT date_trunc('quarter', order_date) AS q, count(*) FROM orders "
            "GROUP BY ALL ORDER BY q",
            ("orders",),
        ),
    ],
)
def test_guard_accepts_reads(sql: str, tables: tuple[str, ...] | None) -> None:
    validated = validate_readonly_sql(sql, known_tables=SAMPLE_TABLES)
    if tables is not None:
        assert validated.tables == tables
    assert validated.query_id.startswith("q_")


def test_guard_query_id_ignores_formatting() -> None:
    a = validate_readonly_sql("select count(*) from orders", known_tables=SAMPLE_TABLES)
    b = validate_readonly_sql("SELECT  COUNT(*)\n  FROM orders ;", known_tables=SAMPLE_TABLES)
    c = validate_readonly_sql("SELECT count(*) FROM customers", known_tables=SAMPLE_TABLES)
    assert a.query_id == b.query_id != c.query_id


def test_tools_apply_the_guard(tools: DataTools) -> None:
    for tool in (tools.run_sql_readonly, tools.plan_query):
        args = {"purpose": "test"} if tool == tools.plan_query else {}
        assert error_code(tool("sample", "DROP TABLE orders", **args)) == SQL_NOT_READ_ONLY
        assert (
            error_code(tool("sample", "SELECT * FROM read_csv('/etc/passwd')", **args))
            == SQL_FORBIDDEN_FUNCTION
        )
        assert error_code(tool("sample", "SELECT * FROM nope", **args)) == SQL_UNKNOWN_TABLE
        assert error_code(tool("sample", "SELECT 1; SELECT 2", **args)) == SQL_MULTIPLE_STATEMENTS


# -- read-only connections --------------------------------------------------------------


@pytest.mark.parametrize(
    "statement",
    [
        "INSERT INTO orders VALUES (99999, 1, DATE '2025-01-01', 'completed')",
        "DELETE FROM orders",
        "DROP TABLE orders",
        "CREATE TABLE main.extra AS SELECT 1 AS x",
        "UPDATE products SET unit_price = 0",
    ],
)
def test_connection_refuses_writes_without_the_guard(catalog: DataCatalog, statement: str) -> None:
    with catalog.cursor("sample") as cur, pytest.raises(duckdb.Error):
        cur.execute(statement)
    with catalog.cursor("sample") as cur:
        assert cur.execute("SELECT count(*) FROM orders").fetchone() == (5000,)


@pytest.mark.parametrize(
    "statement",
    [
        "SELECT * FROM read_csv('/etc/passwd')",
        "COPY orders TO '{tmp}/leak.csv'",
        "ATTACH '{tmp}/other.duckdb' AS other",
        "SET enable_external_access = true",
    ],
)
def test_connection_has_no_file_access_without_the_guard(
    catalog: DataCatalog, tmp_path: Path, statement: str
) -> None:
    with catalog.cursor("sample") as cur, pytest.raises(duckdb.Error):
        cur.execute(statement.format(tmp=tmp_path))
    assert list(tmp_path.iterdir()) == []


def test_two_catalogs_share_the_sample(sample_dir: Path, catalog: DataCatalog) -> None:
    with DataCatalog(cache_dir=sample_dir) as second:
        assert second.tables("sample") == SAMPLE_TABLES
        assert second.row_count("sample", "orders") == 5000
    assert catalog.row_count("sample", "orders") == 5000


# -- run_sql_readonly ----------------------------------------------------------------------


def test_run_sql_row_cap_and_note(tools: DataTools) -> None:
    result = tools.run_sql_readonly("sample", "SELECT * FROM order_items", max_rows=25)
    assert result["row_count"] == 25 and len(result["rows"]) == 25
    assert result["truncated"] is True
    assert "first 25 rows" in result["note"]
    assert result["columns"] == ["order_id", "product_id", "quantity", "unit_price"]

    small = tools.run_sql_readonly("sample", "SELECT * FROM regions", max_rows=25)
    assert small["truncated"] is False and "note" not in small
    assert small["row_count"] == 5

    exact = tools.run_sql_readonly("sample", "SELECT * FROM regions", max_rows=5)
    assert exact["truncated"] is False

    huge = tools.run_sql_readonly("sample", "SELECT * FROM order_items", max_rows=10**9)
    assert huge["row_count"] == 5000 and huge["truncated"] is True


def test_run_sql_rows_are_json_safe(tools: DataTools) -> None:
    result = tools.run_sql_readonly(
        "sample",
        "SELECT order_id, order_date, CAST(1.25 AS DECIMAL(10, 2)) AS price, "
        "TIMESTAMP '2026-01-02 03:04:05' AS ts, 'nan'::DOUBLE AS bad, [1, 2] AS xs, "
        "order_id AS order_id FROM orders ORDER BY order_id LIMIT 2",
    )
    row = result["rows"][0]
    assert row["order_date"] == "2025-01-01"
    assert row["price"] == 1.25 and isinstance(row["price"], float)
    assert row["ts"] == "2026-01-02T03:04:05"
    assert row["bad"] is None
    assert row["xs"] == [1, 2]
    assert result["columns"][-1] == "order_id_2"  # duplicate names are kept apart
    json.dumps(result, allow_nan=False)


def test_run_sql_timeout(tools: DataTools) -> None:
    started = time.perf_counter()
    result = tools.run_sql_readonly(
        "sample",
        "SELECT sum(a.quantity * b.quantity * c.quantity) AS s "
        "FROM order_items a, order_items b, order_items c",
        timeout_s=0.1,
    )
    assert error_code(result) == "QUERY_TIMEOUT"
    assert time.perf_counter() - started < 5
    # The source is still usable afterwards.
    assert tools.run_sql_readonly("sample", "SELECT count(*) AS n FROM orders")["rows"] == [
        {"n": 5000}
    ]


def test_run_sql_reports_engine_errors(tools: DataTools) -> None:
    result = tools.run_sql_readonly("sample", "SELECT no_such_column FROM orders")
    assert error_code(result) == "SQL_EXECUTION_ERROR"
    assert "no_such_column" in result["error"]
    assert error_code(tools.run_sql_readonly("nowhere", "SELECT 1")) == "UNKNOWN_SOURCE"
    assert error_code(tools.run_sql_readonly("sample", None)) == SQL_PARSE_ERROR  # type: ignore[arg-type]


def test_plan_query(tools: DataTools) -> None:
    sql = REVENUE_BY_REGION.format(extra=Q2_2026)
    plan = tools.plan_query("sample", sql, "Completed revenue by region, 2026-Q2")
    assert plan["valid"] is True
    assert plan["tables"] == ["customers", "order_items", "orders", "regions"]
    assert plan["explain"] and len(plan["explain"]) <= 4100
    run = tools.run_sql_readonly("sample", sql)
    assert run["query_id"] == plan["query_id"] and run["planned"] is True
    assert error_code(tools.plan_query("sample", sql, "  ")) == "PURPOSE_REQUIRED"
    unplanned = tools.run_sql_readonly("sample", "SELECT 1 AS one")
    assert unplanned["planned"] is False


# -- resource and time limits -------------------------------------------------------------

# Never finishes: 10^16 rows. The guard allows range(), a table function that only
# generates rows.
ENDLESS = "SELECT count(*) AS n FROM range(100000000) a, range(100000000) b"


def _settings(cat: DataCatalog, source: str) -> tuple[str, int]:
    with cat.cursor(source) as cur:
        row = cur.execute(
            "SELECT current_setting('memory_limit'), current_setting('threads')"
        ).fetchone()
    assert row is not None
    return row[0], int(row[1])


def _as_duckdb_shows(memory_limit: str) -> str:
    with duckdb.connect(":memory:", config={"memory_limit": memory_limit}) as conn:
        row = conn.execute("SELECT current_setting('memory_limit')").fetchone()
    assert row is not None
    return row[0]


def test_connections_get_memory_and_thread_limits(
    catalog: DataCatalog, files: dict[str, Path]
) -> None:
    assert _settings(catalog, "sample") == (_as_duckdb_shows(DEFAULT_MEMORY_LIMIT), DEFAULT_THREADS)
    with DataCatalog(include_sample=False, memory_limit="256MB", threads=1) as cat:
        cat.register("sales", files["csv"])
        cat.register("wh", files["duckdb"])
        for source in ("sales", "wh"):
            assert _settings(cat, source) == (_as_duckdb_shows("256MB"), 1)
            with cat.cursor(source) as cur, pytest.raises(duckdb.Error, match="locked"):
                cur.execute("SET memory_limit = '64GB'")
            with cat.cursor(source) as cur, pytest.raises(duckdb.Error, match="locked"):
                cur.execute("SET threads = 64")


def test_limits_are_checked_when_the_catalog_is_made() -> None:
    for bad in ({"memory_limit": "lots"}, {"memory_limit": ""}, {"threads": 0}):
        with pytest.raises(ValueError):
            DataCatalog(include_sample=False, **bad)
    for timeout in (0, -1, float("inf"), float("nan"), "10"):
        with pytest.raises(ValueError):
            DataCatalog(include_sample=False, query_timeout_s=timeout)


def test_other_limits_on_an_open_file_are_refused_not_rebuilt(
    catalog: DataCatalog, sample_dir: Path
) -> None:
    sample = catalog.source("sample").path
    mtime = sample.stat().st_mtime_ns
    with pytest.raises(DataError, match=r"CONFIG_CONFLICT: .*same memory_limit and threads"):
        DataCatalog(cache_dir=sample_dir, memory_limit="512MB")
    assert sample.stat().st_mtime_ns == mtime  # the open file was not replaced
    assert catalog.row_count("sample", "orders") == 5000


def test_a_slow_query_times_out_and_the_next_one_runs(sample_dir: Path) -> None:
    with DataCatalog(cache_dir=sample_dir, query_timeout_s=1) as cat:
        tools = DataTools(cat)
        # The model asks for more time than the catalog allows: the catalog wins.
        result = tools.run_sql_readonly("sample", ENDLESS, timeout_s=60)
        assert error_code(result) == "QUERY_TIMEOUT"
        assert "after 1 s" in result["error"] and "narrow" in result["error"]
        again = tools.run_sql_readonly("sample", "SELECT count(*) AS n FROM orders")
        assert again["rows"] == [{"n": 5000}]
        assert _settings(cat, "sample") == (_as_duckdb_shows(DEFAULT_MEMORY_LIMIT), DEFAULT_THREADS)


def test_every_cursor_has_a_time_limit(sample_dir: Path) -> None:
    with DataCatalog(cache_dir=sample_dir, query_timeout_s=30) as cat:
        with (
            pytest.raises(DataError, match=r"QUERY_TIMEOUT: .*after 0.5 s"),
            cat.cursor("sample", timeout_s=0.5) as cur,
        ):
            cur.execute(ENDLESS).fetchall()
        # The limit covers the cursor: a statement started after it passed is stopped.
        with (
            pytest.raises(DataError, match="QUERY_TIMEOUT"),
            cat.cursor("sample", timeout_s=0.3) as cur,
        ):
            assert cur.execute("SELECT count(*) FROM regions").fetchone() == (5,)
            time.sleep(0.5)
            cur.execute(ENDLESS).fetchall()
        # A query that ends in time is not disturbed by the limit it did not reach.
        with cat.cursor("sample", timeout_s=0.5) as cur:
            assert cur.execute("SELECT count(*) FROM regions").fetchone() == (5,)
        time.sleep(0.6)
        assert cat.row_count("sample", "regions") == 5


# -- discovery tools -----------------------------------------------------------------------


def test_list_sources_and_schema(tools: DataTools) -> None:
    listed = tools.list_data_sources()
    sample = next(s for s in listed["sources"] if s["name"] == "sample")
    counts = {t["name"]: t["row_count"] for t in sample["tables"]}
    assert counts["orders"] == 5000 and counts["regions"] == 5 and counts["products"] == 40
    assert counts["order_items"] > 5000

    every = tools.inspect_schema("sample")
    assert [t["name"] for t in every["tables"]] == list(SAMPLE_TABLES)
    assert error_code(tools.inspect_schema("sample", "nope")) == "UNKNOWN_TABLE"
    assert error_code(tools.inspect_schema("nope")) == "UNKNOWN_SOURCE"


def test_lookup_values_and_preview(tools: DataTools) -> None:
    statuses = tools.lookup_values("sample", "orders", "status")
    values = [v["value"] for v in statuses["values"]]
    assert values[0] == "completed" and set(values) == {"completed", "cancelled", "refunded"}
    assert sum(v["count"] for v in statuses["values"]) == 5000
    assert statuses["truncated"] is False

    found = tools.lookup_values("sample", "regions", "name", search="EST")
    assert [v["value"] for v in found["values"]] == ["West"]

    capped = tools.lookup_values("sample", "customers", "name", limit=5)
    assert len(capped["values"]) == 5 and capped["truncated"] is True
    assert error_code(tools.lookup_values("sample", "orders", "nope")) == "UNKNOWN_COLUMN"

    preview = tools.preview_table("sample", "orders", limit=1000)
    assert preview["row_count"] == 100 and preview["total_rows"] == 5000
    assert preview["columns"] == ["order_id", "customer_id", "order_date", "status"]


# -- validation and evidence --------------------------------------------------------------


def test_validate_result(tools: DataTools) -> None:
    good = tools.run_sql_readonly("sample", REVENUE_BY_REGION.format(extra=Q2_2026))
    checked = tools.validate_result(good, {"key_columns": ["region"], "min_rows": 5})
    assert checked == {"valid": True, "issues": [], "warnings": [], "row_count": 5}

    empty = tools.run_sql_readonly("sample", "SELECT * FROM orders WHERE status = 'Completed'")
    assert tools.validate_result(empty)["valid"] is False
    assert tools.validate_result(empty, {"allow_empty": True})["valid"] is True

    truncated = tools.run_sql_readonly("sample", "SELECT * FROM orders", max_rows=3)
    assert any("truncated" in i for i in tools.validate_result(truncated)["issues"])

    hand_made = {
        "columns": ["region", "revenue"],
        "rows": [{"region": None, "revenue": 1.0}, {"region": "x", "revenue": float("inf")}],
    }
    issues = tools.validate_result(hand_made)["issues"]
    assert any("null" in i and "region" in i for i in issues)
    assert any("non-finite" in i for i in issues)

    fan_out = {"rows": [{"region": "a", "n": 1}, {"region": "a", "n": 2}]}
    assert tools.validate_result(fan_out, {"key_columns": ["region"]})["valid"] is False
    assert tools.validate_result({"error": "X: y"})["valid"] is False
    assert tools.validate_result("nonsense")["valid"] is False  # type: ignore[arg-type]


def test_bind_evidence(tools: DataTools) -> None:
    run = tools.run_sql_readonly("sample", REVENUE_BY_REGION.format(extra=Q2_2026))
    top = max(run["rows"], key=lambda r: r["revenue"])
    record = tools.bind_evidence(
        f"{top['region']} had the highest completed revenue in 2026-Q2", run["query_id"], [top]
    )
    assert set(record) >= {"evidence_id", "claim", "query_id", "digest"}
    assert record["query_id"] == run["query_id"]
    assert record["digest"] == hashlib.sha256(canonical_json([top]).encode()).hexdigest()
    assert record["evidence_id"].startswith("ev_")
    assert record in tools.evidence
    again = tools.bind_evidence(record["claim"], run["query_id"], [dict(top)])
    assert again["evidence_id"] == record["evidence_id"]

    # A subset of columns is fine; numbers need not repeat float noise.
    partial = tools.bind_evidence("x", run["query_id"], [{"region": top["region"]}])
    assert "error" not in partial

    made_up = dict(top, revenue=top["revenue"] + 1000)
    assert error_code(tools.bind_evidence("x", run["query_id"], [made_up])) == ("EVIDENCE_MISMATCH")
    assert error_code(tools.bind_evidence("x", run["query_id"], [{"nope": 1}])) == (
        "EVIDENCE_MISMATCH"
    )
    assert error_code(tools.bind_evidence("x", "q_unknown", [top])) == "UNKNOWN_QUERY"
    assert error_code(tools.bind_evidence("x", run["query_id"], [])) == "EVIDENCE_EMPTY"
    assert error_code(tools.bind_evidence(" ", run["query_id"], [top])) == "CLAIM_REQUIRED"


# -- registering files ---------------------------------------------------------------------


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    csv_path = tmp_path / "Sales 2026.csv"
    parquet_path = tmp_path / "targets.parquet"
    db_path = tmp_path / "warehouse.duckdb"
    with duckdb.connect() as conn:
        conn.execute(
            "CREATE TABLE s AS SELECT i AS id, CASE WHEN i % 2 = 0 THEN 'North' ELSE 'South' "
            "END AS region, i * 10.5 AS amount, DATE '2026-04-01' + CAST(i AS INTEGER) AS day FROM range(1, 51) t(i)"
        )
        conn.execute(f"COPY s TO '{csv_path}' (HEADER)")
        conn.execute(
            f"COPY (SELECT * FROM (VALUES ('North', 300.0), ('South', 400.0)) t(region, target)) "
            f"TO '{parquet_path}' (FORMAT parquet)"
        )
    with duckdb.connect(str(db_path)) as conn:
        conn.execute("CREATE TABLE a AS SELECT 1 AS x")
        conn.execute("CREATE SCHEMA finance")
        conn.execute("CREATE TABLE finance.budget AS SELECT 'North' AS region, 5 AS amount")
        conn.execute("CREATE VIEW a_view AS SELECT x + 1 AS y FROM a")
    return {"csv": csv_path, "parquet": parquet_path, "duckdb": db_path}


def test_register_csv_and_parquet_and_query(files: dict[str, Path]) -> None:
    with DataCatalog(include_sample=False) as cat:
        tools = DataTools(cat)
        cat.register("sales", files["csv"])
        cat.register("targets", files["parquet"])
        assert cat.tables("sales") == ("sales_2026",)
        assert cat.tables("targets") == ("targets",)

        listed = {s["name"]: s for s in tools.list_data_sources()["sources"]}
        assert listed["sales"]["kind"] == "csv"
        assert listed["sales"]["tables"] == [{"name": "sales_2026", "row_count": 50}]

        result = tools.run_sql_readonly(
            "sales",
            "SELECT region, count(*) AS n, sum(amount) AS total FROM sales_2026 "
            "GROUP BY region ORDER BY region",
        )
        assert result["rows"] == [
            {"region": "North", "n": 25, "total": 6825.0},
            {"region": "South", "n": 25, "total": 6562.5},
        ]
        day = tools.run_sql_readonly("sales", "SELECT max(day) AS d FROM sales_2026")
        assert day["rows"] == [{"d": "2026-05-21"}]
        targets = tools.run_sql_readonly("targets", "SELECT * FROM targets ORDER BY region")
        assert targets["rows"][1] == {"region": "South", "target": 400.0}

        # The file-backed copy is private: files stay out of reach, writes do not stick.
        blocked = tools.run_sql_readonly("sales", f"SELECT * FROM read_csv('{files['csv']}')")
        assert error_code(blocked) == SQL_FORBIDDEN_FUNCTION
        with cat.cursor("sales") as cur, pytest.raises(duckdb.Error):
            cur.execute(f"SELECT * FROM read_csv('{files['csv']}')")
        with cat.cursor("sales") as cur:
            cur.execute("DELETE FROM sales_2026")
            assert cur.execute("SELECT count(*) FROM sales_2026").fetchone() == (0,)
        assert cat.row_count("sales", "sales_2026") == 50
        with cat.cursor("sales") as cur, pytest.raises(duckdb.Error):
            cur.execute(f"COPY sales_2026 TO '{files['csv']}' (USE_TMP_FILE false)")
        assert files["csv"].read_text().startswith("id,region,amount,day")


def test_register_duckdb_file_attaches_all_tables(files: dict[str, Path]) -> None:
    with DataCatalog(include_sample=False) as cat:
        source = cat.register("wh", files["duckdb"])
        assert source.tables == ("a", "a_view", "finance.budget")
        tools = DataTools(cat)
        rows = tools.run_sql_readonly("wh", "SELECT b.amount, v.y FROM finance.budget b, a_view v")[
            "rows"
        ]
        assert rows == [{"amount": 5, "y": 2}]
        schema = tools.inspect_schema("wh", "finance.budget")
        assert [c["name"] for c in schema["tables"][0]["columns"]] == ["region", "amount"]


def test_register_bad_input(tmp_path: Path, files: dict[str, Path]) -> None:
    with DataCatalog(include_sample=False) as cat:
        with pytest.raises(DataError, match="FILE_NOT_FOUND: no such file"):
            cat.register("missing", tmp_path / "missing.csv")
        (tmp_path / "notes.txt").write_text("hello")
        with pytest.raises(DataError, match=r"UNSUPPORTED_FORMAT: .*'\.txt'.*\.csv"):
            cat.register("notes", tmp_path / "notes.txt")
        for bad_name in ("", "1abc", "has space", "semi;colon", "x" * 65):
            with pytest.raises(DataError, match="INVALID_NAME"):
                cat.register(bad_name, files["csv"])
        cat.register("sales", files["csv"])
        with pytest.raises(DataError, match=r"DUPLICATE_SOURCE: .*'sales' is already"):
            cat.register("sales", files["parquet"])
        broken = tmp_path / "broken.parquet"
        broken.write_text("not parquet")
        with pytest.raises(DataError, match="INVALID_FILE"):
            cat.register("broken", broken)
        fake_db = tmp_path / "fake.duckdb"
        fake_db.write_text("not a database")
        with pytest.raises(DataError, match="INVALID_FILE"):
            cat.register("fake", fake_db)
        assert [s.name for s in cat.sources()] == ["sales"]
        with pytest.raises(DataError, match="UNKNOWN_SOURCE"):
            cat.source("nope")


# -- ADK -----------------------------------------------------------------------------------


async def _tool_context():
    from google.adk.agents.invocation_context import InvocationContext
    from google.adk.agents.llm_agent import LlmAgent
    from google.adk.sessions import InMemorySessionService
    from google.adk.tools.tool_context import ToolContext

    sessions = InMemorySessionService()
    session = await sessions.create_session(app_name="plangate-tests", user_id="u")
    return ToolContext(
        InvocationContext(
            session_service=sessions,
            invocation_id="inv-1",
            session=session,
            agent=LlmAgent(name="analyst"),
        ),
        function_call_id="call-1",
    )


async def test_adk_tools(tools: DataTools) -> None:
    adk_tools = data_adk_tools(tools)
    assert [t.name for t in adk_tools] == list(TOOL_NAMES)
    assert all(effect_of(t) is Effect.READ for t in adk_tools)
    by_name = {t.name: t for t in adk_tools}
    for tool in adk_tools:
        declaration = tool._get_declaration()
        assert declaration is not None and declaration.name == tool.name
        assert tool.description and len(tool.description) > 40
    run_decl = by_name["run_sql_readonly"]._get_declaration()
    schema = json.dumps(run_decl.model_dump(exclude_none=True))
    assert "max_rows" in schema and "timeout_s" in schema and "self" not in schema

    context = await _tool_context()
    result = await by_name["run_sql_readonly"].run_async(
        args={"source": "sample", "sql": "SELECT count(*) AS n FROM regions"},
        tool_context=context,
    )
    assert result["rows"] == [{"n": 5}]
    refused = await by_name["run_sql_readonly"].run_async(
        args={"source": "sample", "sql": "DROP TABLE regions"}, tool_context=context
    )
    assert error_code(refused) == SQL_NOT_READ_ONLY


async def test_adk_tools_query_off_the_event_loop(sample_dir: Path) -> None:
    with DataCatalog(cache_dir=sample_dir, query_timeout_s=1) as cat:
        run = {t.name: t for t in data_adk_tools(DataTools(cat))}["run_sql_readonly"]
        context = await _tool_context()
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.05)
                ticks += 1

        ticker = asyncio.create_task(tick())
        try:
            result = await run.run_async(
                args={"source": "sample", "sql": ENDLESS}, tool_context=context
            )
        finally:
            ticker.cancel()
        assert error_code(result) == "QUERY_TIMEOUT"
        assert ticks >= 5  # the loop kept running while the query did
        again = await run.run_async(
            args={"source": "sample", "sql": "SELECT count(*) AS n FROM regions"},
            tool_context=context,
        )
        assert again["rows"] == [{"n": 5}]


def test_headline_numbers_are_stable(tools: DataTools) -> None:
    """Completed revenue by region for 2026-Q2 and 2026-Q3 (pinned for seed 7)."""
    quarters = {
        "2026-Q2": ("2026-04-01", "2026-07-01"),
        "2026-Q3": ("2026-07-01", "2026-10-01"),
    }
    found: dict[str, dict[str, float]] = defaultdict(dict)
    for label, (start, end) in quarters.items():
        extra = f"AND o.order_date >= DATE '{start}' AND o.order_date < DATE '{end}'"
        for row in tools.run_sql_readonly("sample", REVENUE_BY_REGION.format(extra=extra))["rows"]:
            found[label][row["region"]] = row["revenue"]
    assert found["2026-Q2"]["North"] == pytest.approx(104993.16)
    assert found["2026-Q3"]["North"] == pytest.approx(97979.81)
    assert sum(found["2026-Q2"].values()) == pytest.approx(349147.78)
    assert sum(found["2026-Q3"].values()) > sum(found["2026-Q2"].values())
