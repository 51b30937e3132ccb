"""The data layer of the data-analysis agent: sample data, catalog, SQL guard, tools.

``data_adk_tools`` (the ADK wrappers) is imported on first use, so the rest of the
package works without loading google-adk.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .catalog import DataCatalog, DataError, DataSource, default_cache_dir
from .sample import REVENUE_DEFINITION, SAMPLE_DESCRIPTION, build_sample_database
from .sql_guard import SqlGuardError, ValidatedQuery, validate_readonly_sql
from .tools import TOOL_NAMES, DataTools

if TYPE_CHECKING:  # loaded lazily by __getattr__ below
    from .adk_tools import data_adk_tools

__all__ = [
    "REVENUE_DEFINITION",
    "SAMPLE_DESCRIPTION",
    "TOOL_NAMES",
    "DataCatalog",
    "DataError",
    "DataSource",
    "DataTools",
    "SqlGuardError",
    "ValidatedQuery",
    "build_sample_database",
    "data_adk_tools",
    "default_cache_dir",
    "validate_readonly_sql",
]


def __getattr__(name: str) -> Any:
    if name == "data_adk_tools":
        from .adk_tools import data_adk_tools

        return data_adk_tools
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
