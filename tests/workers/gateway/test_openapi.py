"""The OpenAPI document: served, a valid 3.1 document, every route in it, every reference
resolved, every schema a valid JSON schema."""

from __future__ import annotations

import re
from typing import Any

from jsonschema.validators import Draft202012Validator

from tackroom.workers.gateway.app import OPERATIONS, openapi_document

from .served import Served

_METHODS = {"get", "post", "put", "delete", "patch", "head", "options"}


def _refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
        return found + [ref for value in node.values() for ref in _refs(value)]
    if isinstance(node, list):
        return [ref for value in node for ref in _refs(value)]
    return []


def test_the_document_is_openapi_3_1_and_lists_every_route() -> None:
    doc = openapi_document()
    assert doc["openapi"] == "3.1.0"
    assert {"title", "version"} <= set(doc["info"])
    listed = {
        (method.upper(), path)
        for path, item in doc["paths"].items()
        for method in item
        if method in _METHODS
    }
    assert listed == {(op.method, op.path) for op in OPERATIONS}
    operation_ids = [op["operationId"] for item in doc["paths"].values() for op in item.values()]
    assert len(operation_ids) == len(set(operation_ids))
    for path, item in doc["paths"].items():
        names = set(re.findall(r"{(\w+)}", path))
        for op in item.values():
            declared = {p["name"] for p in op["parameters"] if p["in"] == "path"}
            assert declared == names, path
            assert all(re.fullmatch(r"[1-5](\d\d|XX)", code) for code in op["responses"])
            public = op.get("security") == []
            assert ("401" in op["responses"]) != public, path


def test_every_reference_resolves_and_every_schema_is_a_json_schema() -> None:
    doc = openapi_document()
    schemas = doc["components"]["schemas"]
    for ref in _refs(doc):
        assert ref.startswith("#/components/schemas/"), ref
        assert ref.rpartition("/")[2] in schemas, ref
    for name, schema in schemas.items():
        Draft202012Validator.check_schema(schema)
        assert schema.get("type") == "object" or "anyOf" in schema or "oneOf" in schema, name
    assert {"ErrorResponse", "RunBody", "TurnStateView", "AgentEventFrame"} <= set(schemas)


async def test_it_is_served_with_the_token(served: Served) -> None:
    async with served.client() as client:
        reply = await client.get("/v1/openapi.json")
    assert reply.status_code == 200
    assert reply.json() == openapi_document()
