"""One error model: every refusal or failure carries a code, a message and a hint.

```
ErrorCode            the codes, one enum (a ``StrEnum``: a member equals its text)
error_result(...)    a tool result that says why nothing happened, and what to do next
CodedError           the one exception base; to_result() turns it into that result
 ├── WorkspaceError  (agent.tool_errors)   a path or argument a workspace tool refuses
 ├── DataError       (data.catalog)        bad input to the data catalog, a failed query
 │    └── SqlGuardError (data.sql_guard)   a query the SQL guard refuses
 ├── PlanError       (plan.transitions)    a request the plan state machine refuses
 ├── ReplyIgnored    (plan.transitions)    a human reply that changed nothing
 ├── ReplyError      (plan.replies)        a human reply refused before it was recorded
 ├── PlanAppError    (adk.app_check)       an App that cannot run Plan Mode (developer error)
 ├── ToolNameReserved (adk.own_tools)     a tool named like one of plangate's (developer error)
 └── ProtocolError   (protocol.definitions) a protocol governance refusal
```

A result keeps the seed's shape, ``{"error": "<CODE>: <message>"}``, because models and
existing clients read that text; beside it sit ``code``, ``message`` and ``hint`` and
any structured details (``phase``, ``allowed_actions``...). Surfaces read those fields and
never parse the ``error`` text.

Pure: no I/O, no ADK; the core may import it.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any

__all__ = ["CodedError", "ErrorCode", "error_code", "error_result", "is_error"]


class ErrorCode(StrEnum):
    # -- tool arguments and workspace files -------------------------------------------
    INVALID_ARGS = "INVALID_ARGS"  # an argument is missing, mistyped or out of range
    INVALID_STATE = "INVALID_STATE"  # the call is not possible in the current state
    PATH_OUTSIDE_WORKSPACE = "PATH_OUTSIDE_WORKSPACE"  # a path leaves the workspace
    NOT_FOUND = "NOT_FOUND"  # no such file or directory
    NOT_A_FILE = "NOT_A_FILE"  # the path is a directory or a special file
    EDIT_NO_MATCH = "EDIT_NO_MATCH"  # old_string does not occur in the file
    EDIT_AMBIGUOUS = "EDIT_AMBIGUOUS"  # old_string occurs more than once
    TIMEOUT = "TIMEOUT"  # a command ran past its time limit and was killed
    BINARY_FILE = "BINARY_FILE"  # the file is not text
    IO_ERROR = "IO_ERROR"  # the operating system refused a read or write
    HARDLINKED_FILE = "HARDLINKED_FILE"  # writing would change other hard-linked copies
    FILE_TOO_LARGE = "FILE_TOO_LARGE"  # the file is over the size a tool reads
    PATTERN_TIMEOUT = "PATTERN_TIMEOUT"  # a search pattern took too long (catastrophic regex)

    # -- sub-agents ---------------------------------------------------------------------
    SUBAGENT_UNAVAILABLE = "SUBAGENT_UNAVAILABLE"  # the parent has none of the tools it needs
    SUBAGENT_UNTRUSTED = "SUBAGENT_UNTRUSTED"  # a read-only archetype was given a write tool
    SUBAGENT_FAILED = "SUBAGENT_FAILED"  # the sub-agent's run raised

    # -- tools plangate mounts ----------------------------------------------------------
    TOOL_NAME_RESERVED = "TOOL_NAME_RESERVED"  # another tool carries a name of plangate's

    # -- plan gate and plan state -------------------------------------------------------
    PLAN_MODE_GATE = "PLAN_MODE_GATE"  # refused while a plan is being made
    PLAN_STATE_UNREADABLE = "PLAN_STATE_UNREADABLE"  # the stored plan could not be read
    PLAN_CONFLICT = "PLAN_CONFLICT"  # another call changed the plan at the same time
    SCOPE_AMENDMENT_REFUSED = "SCOPE_AMENDMENT_REFUSED"  # the user refused a scope amendment
    EDIT_REFUSED = "EDIT_REFUSED"  # a write outside the approved scope was refused
    TOOL_CALL_REFUSED = "TOOL_CALL_REFUSED"  # a call outside the approved scope was refused
    OUTSIDE_SCOPE = "OUTSIDE_SCOPE"  # needs more than the scope and cannot wait for the user
    PLAN_APP_MISCONFIGURED = "PLAN_APP_MISCONFIGURED"  # no PlanPlugin or not resumable
    NO_AUTHORITY = "NO_AUTHORITY"  # an executor ran without the gate's answer: did nothing
    PROTECTED_PATH = "PROTECTED_PATH"  # git's program files, .plangate, the database
    GIT_CHANGE_REVERTED = "GIT_CHANGE_REVERTED"  # a command changed what makes git run programs
    SANDBOX_UNAVAILABLE = "SANDBOX_UNAVAILABLE"  # no sandbox works, parser-only not chosen
    PATHS_UNDECLARED = "PATHS_UNDECLARED"  # a write tool names no path under a scoped plan

    # -- tool policy --------------------------------------------------------------------
    POLICY_DENIED = "POLICY_DENIED"  # a deny rule matched
    POLICY_ASK = "POLICY_ASK"  # the call needs the user's approval first
    APPROVAL_USED = "APPROVAL_USED"  # an approval was spent, or bound to other arguments
    AMENDMENT_LIMIT = "AMENDMENT_LIMIT"  # too many amendment requests in one step or plan

    # -- human replies ------------------------------------------------------------------
    HITL_REPLY_IGNORED = "HITL_REPLY_IGNORED"  # a reply changed nothing (seed's prefix)
    UNKNOWN_REQUEST = "UNKNOWN_REQUEST"  # no open request has this call id
    ALREADY_ANSWERED = "ALREADY_ANSWERED"  # the request was answered once already
    NO_MATCHING_REQUEST = "NO_MATCHING_REQUEST"  # a reply without id matches no request
    AMBIGUOUS_REPLY = "AMBIGUOUS_REPLY"  # a reply without id matches several requests
    STALE_REPLY = "STALE_REPLY"  # the reply reviewed another revision or question
    INVALID_REPLY = "INVALID_REPLY"  # the reply is malformed
    STALE_RESUME = "STALE_RESUME"  # a resume answers requests that no longer wait

    # -- runs and the web server --------------------------------------------------------
    RUN_STOPPED = "RUN_STOPPED"  # the user stopped the run before the call finished
    RUN_IN_PROGRESS = "RUN_IN_PROGRESS"  # the thread already has a run
    AGENT_ERROR = "AGENT_ERROR"  # the agent raised; the run ended
    BAD_INPUT = "BAD_INPUT"  # a request body the server cannot use
    BAD_HOST = "BAD_HOST"  # a Host header the server does not serve
    SERVER_BUSY = "SERVER_BUSY"  # the server runs as many runs as it admits; retry later
    CROSS_ORIGIN = "CROSS_ORIGIN"  # a write from another origin
    UNAUTHORIZED = "UNAUTHORIZED"  # the bearer token is missing or wrong
    NO_THREAD = "NO_THREAD"  # no thread with this id
    MODE_NOT_CHANGED = "MODE_NOT_CHANGED"  # the mode selection could not be applied
    RUN_LEASE_LOST = "RUN_LEASE_LOST"  # this server lost the thread's run lease; it stopped

    # -- the database -------------------------------------------------------------------
    DATABASE_UNREACHABLE = "DATABASE_UNREACHABLE"  # the server does not answer
    DATABASE_AUTH_FAILED = "DATABASE_AUTH_FAILED"  # wrong user or password
    DATABASE_MISSING = "DATABASE_MISSING"  # no database of that name on the server
    DATABASE_UNKNOWN_HOST = "DATABASE_UNKNOWN_HOST"  # the host name does not resolve
    DATABASE_GONE = "DATABASE_GONE"  # the database file was deleted or replaced in use
    DATABASE_SCHEMA_NEWER = "DATABASE_SCHEMA_NEWER"  # written by a newer plangate
    DATABASE_TABLE_MISSING = "DATABASE_TABLE_MISSING"  # a table was dropped
    DATABASE_CORRUPT = "DATABASE_CORRUPT"  # the file is not a database, or is damaged
    DATABASE_PATH_UNUSABLE = "DATABASE_PATH_UNUSABLE"  # no database file can be made there
    DATABASE_FOREIGN = "DATABASE_FOREIGN"  # another application's tables, none of ours
    DATABASE_DISK_FULL = "DATABASE_DISK_FULL"  # no room left to write the SQLite file
    TEXT_NOT_STORABLE = "TEXT_NOT_STORABLE"  # text the database refuses
    DATABASE_ERROR = "DATABASE_ERROR"  # any other database failure

    # -- model providers ----------------------------------------------------------------
    MODEL_AUTH_FAILED = "MODEL_AUTH_FAILED"  # the provider refused the credentials
    MODEL_RATE_LIMITED = "MODEL_RATE_LIMITED"  # the provider is rate limiting
    MODEL_UNAVAILABLE = "MODEL_UNAVAILABLE"  # no answer, or a server error
    MODEL_REQUEST_REJECTED = "MODEL_REQUEST_REJECTED"  # the provider rejected the request

    # -- data sources and the SQL guard -------------------------------------------------
    FILE_NOT_FOUND = "FILE_NOT_FOUND"  # a data file does not exist
    INVALID_FILE = "INVALID_FILE"  # a data file cannot be opened or read
    INVALID_NAME = "INVALID_NAME"  # a source or table name is not usable
    DUPLICATE_SOURCE = "DUPLICATE_SOURCE"  # a source with this name is registered
    CONFIG_CONFLICT = "CONFIG_CONFLICT"  # two settings contradict each other
    UNKNOWN_SOURCE = "UNKNOWN_SOURCE"  # no registered source has this name
    UNKNOWN_TABLE = "UNKNOWN_TABLE"  # no table has this name
    UNKNOWN_COLUMN = "UNKNOWN_COLUMN"  # no column has this name
    UNKNOWN_QUERY = "UNKNOWN_QUERY"  # no planned query has this id
    UNSUPPORTED_FORMAT = "UNSUPPORTED_FORMAT"  # a file format the catalog does not read
    SOURCE_CLOSED = "SOURCE_CLOSED"  # the source was closed
    QUERY_TIMEOUT = "QUERY_TIMEOUT"  # a query ran past its time limit
    SQL_PARSE_ERROR = "SQL_PARSE_ERROR"  # the SQL does not parse
    SQL_MULTIPLE_STATEMENTS = "SQL_MULTIPLE_STATEMENTS"  # more than one statement
    SQL_NOT_READ_ONLY = "SQL_NOT_READ_ONLY"  # the statement writes
    SQL_FORBIDDEN_FUNCTION = "SQL_FORBIDDEN_FUNCTION"  # a function that reads files or state
    SQL_UNKNOWN_TABLE = "SQL_UNKNOWN_TABLE"  # the query names a table of no source
    SQL_EXECUTION_ERROR = "SQL_EXECUTION_ERROR"  # the database raised while running it
    EVIDENCE_MISMATCH = "EVIDENCE_MISMATCH"  # a claim does not match the evidence
    EVIDENCE_EMPTY = "EVIDENCE_EMPTY"  # no rows to bind as evidence
    PURPOSE_REQUIRED = "PURPOSE_REQUIRED"  # plan_query needs what the query answers
    CLAIM_REQUIRED = "CLAIM_REQUIRED"  # bind_evidence needs the claim the rows support
    INTERNAL_ERROR = "INTERNAL_ERROR"  # a bug in plangate; the message names the exception

    # -- protocols: refusals at the boundary (the run goes on) --------------------------
    ACTION_NOT_ALLOWED_IN_PHASE = "ACTION_NOT_ALLOWED_IN_PHASE"  # not an action of this phase
    PROTOCOL_ACTION_BUDGET_EXHAUSTED = "PROTOCOL_ACTION_BUDGET_EXHAUSTED"  # calls used up
    PROTOCOL_GUARD_REJECTED = "PROTOCOL_GUARD_REJECTED"  # the runtime guard refused it
    PROTOCOL_SEGMENT_NOT_ACTIVE = "PROTOCOL_SEGMENT_NOT_ACTIVE"  # the segment has ended
    PROTOCOL_RUN_NOT_STARTED = "PROTOCOL_RUN_NOT_STARTED"  # no protocol run (fail closed)
    ANALYSIS_REQUIREMENTS_INVALID = "ANALYSIS_REQUIREMENTS_INVALID"  # unknown ids or statuses
    PROTOCOL_HANDOFF_PROPOSAL_INVALID = "PROTOCOL_HANDOFF_PROPOSAL_INVALID"  # unknown target
    PROTOCOL_HANDOFF_SOURCE_NOT_ACTIVE = "PROTOCOL_HANDOFF_SOURCE_NOT_ACTIVE"  # source ended
    PROTOCOL_HANDOFF_TARGET_UNAVAILABLE = "PROTOCOL_HANDOFF_TARGET_UNAVAILABLE"  # unknown
    PROTOCOL_ROUTE_CORRECTION_NOT_ALLOWED = "PROTOCOL_ROUTE_CORRECTION_NOT_ALLOWED"  # too late
    PROTOCOL_HANDOFF_SAME_PROTOCOL = "PROTOCOL_HANDOFF_SAME_PROTOCOL"  # already there
    PROTOCOL_HANDOFF_VERSION_DOWNGRADE = "PROTOCOL_HANDOFF_VERSION_DOWNGRADE"  # older version
    PROTOCOL_HANDOFF_NOT_AUTHORIZED = "PROTOCOL_HANDOFF_NOT_AUTHORIZED"  # not authorized
    PROTOCOL_HANDOFF_UNRESOLVED_STRICT_GOALS = "PROTOCOL_HANDOFF_UNRESOLVED_STRICT_GOALS"
    """Strict goals of the source are open; the handoff would drop them."""
    SESSION_INTENT_REVISION_CONFLICT = "SESSION_INTENT_REVISION_CONFLICT"  # intent moved on
    PROTOCOL_STATE_CONFLICT = "PROTOCOL_STATE_CONFLICT"  # another run wrote the state first

    # -- protocols: routing, definitions and run outcomes (the run fails) ---------------
    PROTOCOL_NOT_REGISTERED = "PROTOCOL_NOT_REGISTERED"  # no definition for the reference
    PROTOCOL_NOT_AUTHORIZED = "PROTOCOL_NOT_AUTHORIZED"  # the protocol is not authorized
    PROTOCOL_RESUME_SELECTION_MISMATCH = "PROTOCOL_RESUME_SELECTION_MISMATCH"  # != restored
    PROTOCOL_AMBIGUOUS = "PROTOCOL_AMBIGUOUS"  # routing rules tie
    PROTOCOL_NOT_RESOLVED = "PROTOCOL_NOT_RESOLVED"  # no protocol could be chosen
    PROTOCOL_SELECTION_INVALID = "PROTOCOL_SELECTION_INVALID"  # a malformed stored selection
    PROTOCOL_SEGMENT_MISSING = "PROTOCOL_SEGMENT_MISSING"  # the active segment is gone
    PROTOCOL_PHASE_UNKNOWN = "PROTOCOL_PHASE_UNKNOWN"  # a definition names no such phase
    PROTOCOL_ALREADY_REGISTERED = "PROTOCOL_ALREADY_REGISTERED"  # registered twice
    PROTOCOL_TRANSITION_CYCLE = "PROTOCOL_TRANSITION_CYCLE"  # phase transitions loop
    PROTOCOL_CLASSIFIER_OUTPUT_INVALID = "PROTOCOL_CLASSIFIER_OUTPUT_INVALID"  # bad JSON
    GENERAL_ANSWER_MESSAGE_MISSING = "GENERAL_ANSWER_MESSAGE_MISSING"  # commit has no message
    RUN_INTENT_BINDING_NOT_FOUND = "RUN_INTENT_BINDING_NOT_FOUND"  # run has no intent binding
    RUN_INTENT_BINDING_REQUIRED = "RUN_INTENT_BINDING_REQUIRED"  # a run needs an intent
    SESSION_LINEAGE_CYCLE = "SESSION_LINEAGE_CYCLE"  # session parents loop
    SESSION_LINEAGE_TOO_DEEP = "SESSION_LINEAGE_TOO_DEEP"  # too many session parents
    SESSION_FORK_INVALID = "SESSION_FORK_INVALID"  # a fork of an unknown session
    SESSION_INTENT_REVISION_UNKNOWN = "SESSION_INTENT_REVISION_UNKNOWN"  # no such revision
    PROTOCOL_RUN_FAILED = "PROTOCOL_RUN_FAILED"  # the run failed without a finer code
    DATA_ACTIONS_REJECTED_BY_PROTOCOL = "DATA_ACTIONS_REJECTED_BY_PROTOCOL"  # never recovered
    PROTOCOL_TERMINAL_DECISION_REQUIRED = "PROTOCOL_TERMINAL_DECISION_REQUIRED"  # no decision


def error_result(code: ErrorCode, message: str, hint: str = "", **fields: Any) -> dict[str, Any]:
    """A tool result that carries a refusal or failure.

    ``fields`` are structured details (``phase``, ``allowed_actions``, partial output...)
    so no reader has to take them out of the text.
    """
    return {
        "error": f"{code.value}: {message}",
        "code": code.value,
        "message": message,
        "hint": hint,
        **fields,
    }


def is_error(result: object) -> bool:
    """The result reports a refusal or a failure."""
    return isinstance(result, Mapping) and bool(result.get("error"))  # pyright: ignore[reportUnknownMemberType]


def error_code(result: object) -> ErrorCode | None:
    """The code of an error result; None for a success or a result without a known code."""
    if not isinstance(result, Mapping):
        return None
    code = result.get("code")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    try:
        return ErrorCode(code)
    except ValueError:
        return None


class CodedError(Exception):
    """The base of plangate's errors: a code, a message and a hint for what to do next."""

    def __init__(self, code: ErrorCode, message: str, hint: str = "", **fields: Any) -> None:
        super().__init__(f"{code.value}: {message}")
        self.code = code
        self.message = message
        self.hint = hint
        self.fields = fields

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code.value!r}, message={self.message!r})"

    def to_result(self) -> dict[str, Any]:
        """What the model (or a client) is shown in place of the result."""
        return error_result(self.code, self.message, self.hint, **self.fields)
