"""Validate JSON documents against a schema of the scheme's official OpenAPI document.

Usage: validate_oas.py SPEC.yaml POINTER [closed] < documents.json
       validate_oas.py SPEC.yaml --each [closed] < items.json

POINTER is a JSON pointer into the OpenAPI document (e.g.
/components/schemas/delegationRequestBody/properties/delegationRequest); standard input holds a
JSON array of documents. Every document is validated with the OpenAPI 3.0 dialect of
openapi-schema-validator; the errors are printed, one per line, and the exit status is the
number of documents that did not validate. With --each, standard input holds a JSON array of
{"what", "pointer", "document"}: each document is validated at its own pointer, and its errors
are printed after what it is.

With `closed`, an object schema that lists its properties and says nothing of others admits no
others: a member the document does not define (a misplaced one) is an error, as a registry that
reads its schema strictly finds it.
"""

import json
import re
import sys

import yaml
from openapi_schema_validator import OAS30Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT4


class Yaml12Loader(yaml.SafeLoader):
    """YAML as 1.2 reads it: only true and false are booleans. (YAML 1.1, PyYAML's default,
    reads the document's enums `[yes, no, not-applicable]` as booleans.)"""


Yaml12Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
Yaml12Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool",
    re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
    list("tTfF"),
)


def close(node):
    """Every object schema with properties and no word on others admits no others."""
    if isinstance(node, dict):
        if isinstance(node.get("properties"), dict) and "additionalProperties" not in node:
            node["additionalProperties"] = False
        for value in node.values():
            close(value)
    elif isinstance(node, list):
        for value in node:
            close(value)


def main():
    spec_path, pointer = sys.argv[1], sys.argv[2]
    closed = sys.argv[3:] == ["closed"]
    with open(spec_path, encoding="utf-8") as f:
        spec = yaml.load(f, Loader=Yaml12Loader)
    if closed:
        close(spec.get("components", {}))
    root = "urn:ishare-openapi"
    registry = Registry().with_resource(root, Resource(contents=spec, specification=DRAFT4))

    def errors_at(at, document):
        validator = OAS30Validator({"$ref": root + "#" + at}, registry=registry)
        return sorted(validator.iter_errors(document), key=lambda e: list(e.path))

    if pointer == "--each":
        items = [(item["what"], item["pointer"], item["document"]) for item in json.load(sys.stdin)]
    else:
        items = [(f"document {i}", pointer, d) for i, d in enumerate(json.load(sys.stdin))]
    failed = 0
    for what, at, document in items:
        errors = errors_at(at, document)
        for e in errors:
            where = "/".join(str(p) for p in e.path)
            print(f"{what}: at /{where}: {e.message}")
        failed += bool(errors)
    sys.exit(min(failed, 125))


if __name__ == "__main__":
    main()
