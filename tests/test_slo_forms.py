"""The generated Sloth, Pyrra and OpenSLO documents validate against their upstream schemas
(copies under tests/: tests/crds/SOURCES.md, tests/schemas/SOURCES.md)."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
import yaml
from referencing import Registry, Resource

from slo.__main__ import ROOT
from tests.support.helm_chart import crd_schema

GENERATED = ROOT / "slo" / "generated"
OPENSLO = ROOT / "tests" / "schemas" / "openslo-v1"


def documents(name: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all((GENERATED / name).read_text()) if doc]


def camel_keys(value: Any) -> Any:
    """Sloth's prometheus/v1 keys as its CRD spells them: the same Go fields, with JSON
    names in snake case in the file and in camel case in the CRD (page_alert, pageAlert);
    label and annotation names are data and stay."""
    if isinstance(value, list):
        return [camel_keys(item) for item in value]
    if not isinstance(value, dict):
        return value
    renamed = {}
    for key, item in value.items():
        head, *rest = key.split("_")
        name = head + "".join(part.title() for part in rest)
        renamed[name] = item if key in ("labels", "annotations") else camel_keys(item)
    return renamed


def test_the_sloth_spec_validates_against_sloths_schema() -> None:
    (spec,) = documents("sloth.yml")
    assert spec["version"] == "prometheus/v1"
    # The PrometheusServiceLevel CRD's spec is the prometheus/v1 file without `version`.
    schema = crd_schema("sloth.slok.dev/v1", "PrometheusServiceLevel")["properties"]["spec"]
    body = {k: v for k, v in spec.items() if k != "version"}
    jsonschema.Draft7Validator(schema).validate(camel_keys(body))
    with pytest.raises(jsonschema.ValidationError):  # the closed schema sees a misspelling
        jsonschema.Draft7Validator(schema).validate(camel_keys({**body, "slo": []}))
    for slo in spec["slos"]:
        for query in slo["sli"]["events"].values():
            assert "{{.window}}" in query


def test_the_pyrra_resources_validate_against_pyrras_crd() -> None:
    resources = documents("pyrra.yml")
    assert resources
    validator = jsonschema.Draft7Validator(
        crd_schema("pyrra.dev/v1alpha1", "ServiceLevelObjective")
    )
    for resource in resources:
        validator.validate(resource)


def openslo_validator() -> jsonschema.Draft7Validator:
    """The OpenSLO schemas, their `$id` addresses resolved to the copies here."""
    resources = []
    for path in sorted(OPENSLO.rglob("*.schema.json")):
        schema = json.loads(path.read_text())
        resources.append((schema["$id"], Resource.from_contents(schema)))
    registry: Registry[Any] = Registry().with_resources(resources)
    root = json.loads((OPENSLO / "openslo.schema.json").read_text())
    return jsonschema.Draft7Validator(root, registry=registry)


def test_the_openslo_documents_validate_against_the_openslo_schema() -> None:
    validator = openslo_validator()
    docs = documents("openslo.yml")
    assert {doc["kind"] for doc in docs} == {"Service", "SLO"}
    for doc in docs:
        validator.validate(doc)


def test_the_openslo_schema_catches_a_broken_document() -> None:
    """The copies are wired up: a document the schema forbids fails."""
    (slo, *_) = [doc for doc in documents("openslo.yml") if doc["kind"] == "SLO"]
    broken = {**slo, "spec": {**slo["spec"], "budgetingMethod": "Sometimes"}}
    with pytest.raises(jsonschema.ValidationError):
        openslo_validator().validate(broken)
    nameless = {**slo, "metadata": {"displayName": "x"}}
    with pytest.raises(jsonschema.ValidationError):
        openslo_validator().validate(nameless)
