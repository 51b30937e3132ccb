"""plangate: make LLM agents plan first, then act -- enforced in code.

Start at ``plangate.adk.setup_plan`` (Plan Mode on a Google ADK agent) and
``plangate.adk.protocols.setup_protocols`` (protocol routing governance).
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("plangate")
except PackageNotFoundError:  # running from a source tree without installing
    __version__ = "0.0.0"
