"""``StoreSessionService``: ADK sessions kept in plangate's own store.

ADK's ``DatabaseSessionService`` opens an ORM session per call and sends every statement
through the async driver's thread; on SQLite an appended event costs seven statements and
as many thread hops, and a served run appends several. Here, on the same database as
the plans and journal:

- a session is a versioned document (its own state, its update time and how many events
  it has), each event a document of its own keyed by its position, app and user state
  one document each (ADK's ``app:`` and ``user:`` prefixes);
- an appended event is one commit -- event, session and any app or user state together,
  by compare-and-set -- in one hop to the commit thread on SQLite;
- reads take the lock-free reader on SQLite; a read of the state alone
  (``GetSessionConfig(num_recent_events=0)``) never touches the events.

The contract is ADK's ``BaseSessionService``: ``temp:`` state lives only in the session
object, a write from a session object that another writer has overtaken raises
``StaleSessionError``, and nothing of a refused append is stored.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from google.adk.errors import StaleSessionError
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.events import Event
from google.adk.sessions import BaseSessionService, Session
from google.adk.sessions.base_session_service import GetSessionConfig, ListSessionsResponse
from google.adk.sessions.state import State
from sqlalchemy import delete, select

from plangate.adk.decoded_events import DecodedEvents
from plangate.store.fresh import FreshDocuments
from plangate.store.schema import documents
from plangate.store.shared import StoreOfLoop
from plangate.store.sql import Sql, fetch_all
from plangate.store.store import Conflict, Document, Store
from plangate.store.writes import Put, commit

__all__ = ["StoreSessionService"]

SESSION_KIND = "adk_session"
EVENT_KIND = "adk_event"
APP_STATE_KIND = "adk_app_state"
USER_STATE_KIND = "adk_user_state"

_STALE = (
    "The session has been modified in storage since it was loaded. "
    "Please reload the session before appending more events."
)

# Events of one session: keys from "<session key>#" up to (not including) "<session key>$".
_EVENTS = Sql(
    "SELECT data FROM plangate_documents WHERE kind = :kind AND key > :low AND key < :high "
    "ORDER BY key"
)
_FIRST_EVENTS = Sql(
    "SELECT data FROM plangate_documents WHERE kind = :kind AND key > :low AND key < :high "
    "ORDER BY key LIMIT :count"
)
_TITLE_SCAN = 20
"""Events read at most to find a thread's first user message (normally the first)."""


def _session_key(app_name: str, user_id: str, session_id: str) -> str:
    # JSON keeps the parts apart whatever characters the ids hold.
    return json.dumps([app_name, user_id, session_id])


def _user_key(app_name: str, user_id: str) -> str:
    return json.dumps([app_name, user_id])


def _event_key(session_key: str, position: int) -> str:
    return f"{session_key}#{position:012d}"


def _split(delta: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(app, user, session) parts of a state delta, prefixes removed; temp: dropped."""
    app: dict[str, Any] = {}
    user: dict[str, Any] = {}
    own: dict[str, Any] = {}
    for key, value in delta.items():
        if key.startswith(State.APP_PREFIX):
            app[key.removeprefix(State.APP_PREFIX)] = value
        elif key.startswith(State.USER_PREFIX):
            user[key.removeprefix(State.USER_PREFIX)] = value
        elif not key.startswith(State.TEMP_PREFIX):
            own[key] = value
    return app, user, own


def _merged(own: dict[str, Any], app: dict[str, Any], user: dict[str, Any]) -> dict[str, Any]:
    state = dict(own)
    state.update({State.APP_PREFIX + k: v for k, v in app.items()})
    state.update({State.USER_PREFIX + k: v for k, v in user.items()})
    return state


def _as_document(_key: str, document: Document | None) -> Document | None:
    return document


def _state_of(stored: Document | None) -> dict[str, Any]:
    return dict(stored.data) if stored is not None else {}


class StoreSessionService(BaseSessionService):
    """ADK sessions on plangate's store (``database_url`` as ``build_runner`` takes it)."""

    def __init__(self, database_url: str | None = None) -> None:
        self.database_url = database_url
        self._stores = StoreOfLoop()
        self._sessions = FreshDocuments(SESSION_KIND, _as_document)
        """Session documents as read or appended here: an append reads the row (it must
        see any other writer's) but decodes it only when another writer changed it."""
        self._decoded = DecodedEvents()
        """Events as decoded here, handed out as copies (``plangate.adk.decoded_events``)."""

    async def _store(self) -> Store:
        # Every read and append asks: the store kept for this loop, without resolving
        # the URL again.
        return await self._stores.get(self.database_url)

    # -- reads ----------------------------------------------------------------------

    async def get_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        config: GetSessionConfig | None = None,
    ) -> Session | None:
        store = await self._store()
        key = _session_key(app_name, user_id, session_id)
        user_key = _user_key(app_name, user_id)
        # The session with its app and user state: one statement, not three.
        found = await store.get_many(
            [(SESSION_KIND, key), (APP_STATE_KIND, app_name), (USER_STATE_KIND, user_key)]
        )
        stored = found.get((SESSION_KIND, key))
        if stored is None:
            return None
        app = _state_of(found.get((APP_STATE_KIND, app_name)))
        user = _state_of(found.get((USER_STATE_KIND, user_key)))
        events: list[Event] = []
        # The document counts the events: a session without any needs no query for them.
        if stored.data["events"] and (config is None or config.num_recent_events != 0):
            events = await self._events(store, key)
            if config is not None and config.after_timestamp is not None:
                events = [e for e in events if e.timestamp >= config.after_timestamp]
            if config is not None and config.num_recent_events is not None:
                events = events[-config.num_recent_events :]
        data = stored.data
        return Session(
            id=session_id,
            app_name=app_name,
            user_id=user_id,
            state=_merged(data["state"], app, user),
            events=events,
            last_update_time=data["last_update_time"],
        )

    async def list_sessions(
        self, *, app_name: str, user_id: str | None = None
    ) -> ListSessionsResponse:
        """The sessions with their state (no events), oldest update first."""
        store = await self._store()
        prefix = json.dumps([app_name] if user_id is None else [app_name, user_id])[:-1] + ", "
        query = select(documents.c.data).where(
            documents.c.kind == SESSION_KIND, documents.c.key.startswith(prefix, autoescape=True)
        )

        async def read(conn: Any) -> list[Any]:
            return [row.data for row in (await conn.execute(query)).all()]

        found = await store.read(read)
        app = await self._state(store, APP_STATE_KIND, app_name)
        sessions = []
        for data in sorted(found, key=lambda d: d["last_update_time"]):
            user = await self._state(store, USER_STATE_KIND, _user_key(app_name, data["user_id"]))
            sessions.append(
                Session(
                    id=data["id"],
                    app_name=app_name,
                    user_id=data["user_id"],
                    state=_merged(data["state"], app, user),
                    last_update_time=data["last_update_time"],
                )
            )
        return ListSessionsResponse(sessions=sessions)

    async def first_user_text(self, *, app_name: str, user_id: str, session_id: str) -> str:
        """The text of the session's first user message ("" if its first events hold
        none): what a thread list shows. One bounded read of the first stored events,
        taken as JSON rather than decoded into ADK events, so it costs the same however
        long the conversation is -- a list of 50 threads of 200 events each read and
        decoded them all (~1 s on the event loop)."""
        store = await self._store()
        key = _session_key(app_name, user_id, session_id)
        bounds = {"kind": EVENT_KIND, "low": key + "#", "high": key + "$", "count": _TITLE_SCAN}

        async def read(conn: Any) -> list[tuple[Any, ...]]:
            return await fetch_all(conn, _FIRST_EVENTS, bounds)

        for (data,) in await store.read(read):
            event = json.loads(data) if isinstance(data, str) else data
            if event.get("author") != "user":
                continue
            parts = (event.get("content") or {}).get("parts") or []
            text = " ".join(p["text"] for p in parts if p.get("text")).strip()
            if text:
                return text
        return ""

    async def get_user_state(self, *, app_name: str, user_id: str) -> dict[str, Any]:
        return await self._state(await self._store(), USER_STATE_KIND, _user_key(app_name, user_id))

    @staticmethod
    async def _state(store: Store, kind: str, key: str) -> dict[str, Any]:
        return _state_of(await store.get(kind, key))

    async def _events(self, store: Store, session_key: str) -> list[Event]:
        bounds = {"kind": EVENT_KIND, "low": session_key + "#", "high": session_key + "$"}

        async def read(conn: Any) -> list[tuple[Any, ...]]:
            return await fetch_all(conn, _EVENTS, bounds)

        rows = [data for (data,) in await store.read(read)]
        if all(isinstance(data, str) for data in rows):  # JSON text: sqlite3, asyncpg
            return self._decoded.events(session_key, rows)
        # Decoded already (SQLAlchemy's JSON type, when the reader was busy).
        return [Event.model_validate(data) for data in rows]

    # -- writes ---------------------------------------------------------------------

    async def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> Session:
        session_id = (session_id or "").strip() or uuid.uuid4().hex
        store = await self._store()
        app_delta, user_delta, own = _split(state or {})
        now = time.time()
        key = _session_key(app_name, user_id, session_id)
        data = {
            "id": session_id,
            "user_id": user_id,
            "state": own,
            "last_update_time": now,
            "events": 0,
        }
        puts = [Put(SESSION_KIND, key, data, 0)]
        puts += await self._state_puts(store, app_name, user_id, app_delta, user_delta)
        try:
            [version, *_] = await commit(store, puts, [])
        except Conflict as exc:
            if exc.kind == SESSION_KIND:
                raise AlreadyExistsError(f"Session with id {session_id} already exists.") from None
            raise
        self._sessions.learn(store, key, version, puts[0].text, Document(data, version))
        created = await self.get_session(app_name=app_name, user_id=user_id, session_id=session_id)
        assert created is not None
        return created

    async def append_event(self, session: Session, event: Event) -> Event:
        if event.partial:
            return event
        self._apply_temp_state(session, event)
        event = self._trim_temp_delta_state(event)
        store = await self._store()
        key = _session_key(session.app_name, session.user_id, session.id)
        stored = await self._sessions.get(store, key)
        if stored is None:
            raise ValueError(f"session {session.id!r} not found")
        data = stored.data
        if data["last_update_time"] > session.last_update_time:
            raise StaleSessionError(_STALE)
        delta = event.actions.state_delta if event.actions and event.actions.state_delta else {}
        app_delta, user_delta, own = _split(delta)
        position = data["events"]
        updated = {
            **data,
            "state": {**data["state"], **own},
            # Strictly later than the last append, so an overtaken session object is
            # always recognised as stale.
            "last_update_time": max(time.time(), data["last_update_time"] + 1e-6),
            "events": position + 1,
        }
        written = Put(SESSION_KIND, key, updated, stored.version)
        puts = [
            written,
            Put(
                EVENT_KIND,
                _event_key(key, position),
                event.model_dump(mode="json", exclude_none=True),
                0,
            ),
        ]
        puts += await self._state_puts(
            store, session.app_name, session.user_id, app_delta, user_delta
        )
        try:
            [version, *_] = await commit(store, puts, [])
        except Conflict:
            # Another writer appended since this session object was read.
            raise StaleSessionError(_STALE) from None
        self._sessions.learn(store, key, version, written.text, Document(updated, version))
        self._commit_event_to_session(session, event)
        session.last_update_time = updated["last_update_time"]
        return event

    async def _state_puts(
        self,
        store: Store,
        app_name: str,
        user_id: str,
        app_delta: dict[str, Any],
        user_delta: dict[str, Any],
    ) -> list[Put]:
        puts = []
        for kind, key, delta in (
            (APP_STATE_KIND, app_name, app_delta),
            (USER_STATE_KIND, _user_key(app_name, user_id), user_delta),
        ):
            if not delta:
                continue
            stored = await store.get(kind, key)
            current = dict(stored.data) if stored is not None else {}
            puts.append(Put(kind, key, {**current, **delta}, stored.version if stored else 0))
        return puts

    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        store = await self._store()
        key = _session_key(app_name, user_id, session_id)
        self._decoded.forget(key)
        async with store.transaction() as tx:
            await tx.connection.execute(
                delete(documents).where(
                    documents.c.kind == EVENT_KIND,
                    documents.c.key > key + "#",
                    documents.c.key < key + "$",
                )
            )
            await tx.connection.execute(
                delete(documents).where(documents.c.kind == SESSION_KIND, documents.c.key == key)
            )
