from typing import Any

class node:
    """A parsed bash node; its attributes depend on ``kind``."""

    kind: str
    pos: tuple[int, int]
    word: str
    parts: list[node]
    list: list[node]
    command: node
    output: node | int
    input: int | None
    type: str
    value: str
    op: str
    redirects: list[node]
    def __init__(self, **kwargs: Any) -> None: ...
    def dump(self, indent: str = ...) -> str: ...
    def __getattr__(self, name: str) -> Any: ...

class nodevisitor:
    def visit(self, n: node) -> None: ...
