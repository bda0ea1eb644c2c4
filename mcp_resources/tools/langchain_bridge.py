"""LangChain tools served as MCP tools of an ``MCPServer`` (the optional extra ``mcp-blobstore[langchain]``).

A LangChain tool (``langchain-core``: a function under ``@tool``, or a ``BaseTool``) becomes an MCP tool of
the same name, description and arguments: :func:`register_langchain_tools` gives the ``MCPServer`` a function
whose signature is the tool's argument model, so the server derives the same ``inputSchema`` pydantic gives
the model, and the call is the tool's own ``ainvoke``. Plain tools work as they do with ``lc2mcp``
(``register_tools(mcp, [get_weather])``). A tool whose arguments or result are typed media
(:mod:`mcp_resources.tools.media_params`: ``Image``, ``Audio``, ``Video``, ``Document``, limits in
``Annotated[…, MediaLimits(…)]``) gets what an ``MCPServer`` tool written with those types gets, when the
server embeds the store (``embed_store``): every file form, the checks before the call, and its results stored
and answered by the store's rules.

Typed media are read with async methods (``await image.facts()``), so a tool that uses them is an async
function (``@tool async def …``).
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Sequence
from typing import Annotated, Any

from langchain_core.tools import BaseTool
from langchain_core.tools import tool as as_langchain_tool
from mcp.server import MCPServer
from pydantic import BaseModel, Field
from pydantic_core import PydanticUndefined

_JSON_TYPES: dict[str, Any] = {
    "string": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "array": list,
    "object": dict,
}


def _parameters_of_model(model: type[BaseModel] | type[Any]) -> list[inspect.Parameter]:
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        raise TypeError(f"{model!r}: LangChain tools with pydantic v1 argument models are not supported")
    out = []
    for name, info in model.model_fields.items():
        annotation: Any = info.annotation
        extras = [*info.metadata]
        if info.description is not None:
            extras.append(Field(description=info.description))
        if extras:
            annotation = Annotated[(annotation, *extras)]
        if info.default is not PydanticUndefined:
            default = info.default
        elif info.default_factory is not None:
            default = info.get_default(call_default_factory=True)
        else:
            default = inspect.Parameter.empty
        out.append(
            inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=default)
        )
    return out


def _parameters_of_json(schema: dict[str, Any]) -> list[inspect.Parameter]:
    """A tool whose ``args_schema`` is a JSON schema: each property by its JSON type (as ``lc2mcp`` does)."""
    required = set(schema.get("required", ()))
    out = []
    for name, node in (schema.get("properties") or {}).items():
        kind = node.get("type", "string")
        if isinstance(kind, list):
            kind = next((k for k in kind if k != "null"), "string")
        annotation: Any = _JSON_TYPES.get(kind, Any)
        if node.get("description"):
            annotation = Annotated[annotation, Field(description=node["description"])]
        if name in required and "default" not in node:
            default: Any = inspect.Parameter.empty
        else:
            default = node.get("default")
            annotation = annotation | None if "default" not in node else annotation
        out.append(
            inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=default)
        )
    return out


def _return_annotation(tool: BaseTool) -> Any:
    """What the tool's own function says it returns (``Any`` when it says nothing)."""
    kind = type(tool)
    overridden = [fn for fn in (kind._arun, kind._run) if fn not in (BaseTool._arun, BaseTool._run)]
    for fn in (getattr(tool, "coroutine", None), getattr(tool, "func", None), *overridden):
        if fn is None:
            continue
        try:
            hints = typing.get_type_hints(fn, include_extras=True)
        except (NameError, TypeError):
            continue
        if "return" in hints:
            return hints["return"]
    return Any


def mcp_function(tool: BaseTool) -> Callable[..., Any]:
    """An async function an ``MCPServer`` registers for ``tool``: the tool's arguments as its signature, the
    tool's own return annotation, and the tool's ``ainvoke`` as its body."""
    schema = tool.tool_call_schema
    parameters = _parameters_of_json(schema) if isinstance(schema, dict) else _parameters_of_model(schema)
    returns = _return_annotation(tool)

    async def call(**arguments: Any) -> Any:
        return await tool.ainvoke(arguments)

    call.__name__ = tool.name
    call.__qualname__ = tool.name
    call.__doc__ = tool.description
    call.__signature__ = inspect.Signature(parameters, return_annotation=returns)  # type: ignore[attr-defined]
    call.__annotations__ = {**{p.name: p.annotation for p in parameters}, "return": returns}
    return call


def register_langchain_tools(
    mcp: MCPServer,
    tools: Sequence[BaseTool | Callable[..., Any]],
    *,
    name_prefix: str | None = None,
) -> list[str]:
    """Register each LangChain tool (or plain function, made a tool as ``@tool`` makes it) on ``mcp``; the
    names registered, each ``name_prefix`` + the tool's name."""
    names = []
    for item in tools:
        found = item if isinstance(item, BaseTool) else as_langchain_tool(item)
        assert isinstance(found, BaseTool)
        name = f"{name_prefix or ''}{found.name}"
        mcp.add_tool(mcp_function(found), name=name, description=found.description)
        names.append(name)
    return names


__all__ = ["mcp_function", "register_langchain_tools"]
