"""The report's JSON Schema (share/report.schema.json), checked on records (issue 42).

validate(record) -> list of error texts, empty when the record holds to the
schema. Each record is checked against the definition its "type" names, so
an error says which member is wrong, not only that no branch of the oneOf
fitted. python3-jsonschema (Debian 12) is the validator; the whole schema
is also checked as a schema once.
"""
import json
import os

_HERE = os.path.dirname(os.path.abspath(__file__))
# Beside the tests when run.py staged them, else the checkout's.
SCHEMA_PATH = next((p for p in (os.path.join(_HERE, "report.schema.json"),
                                os.path.join(_HERE, "..", "..", "share", "report.schema.json"))
                    if os.path.exists(p)), os.path.join(_HERE, "report.schema.json"))
_DEFS = {"confinement": "confinement", "error": "error", "result": "result", "network": "networkRecord",
         "integrity": "integrity", "gap": "gapRecord"}
_validators = {}


def _validator(name):
    if name not in _validators:
        import jsonschema
        with open(SCHEMA_PATH) as f:
            schema = json.load(f)
        jsonschema.Draft202012Validator.check_schema(schema)
        if not _validators:
            _validators[None] = jsonschema.Draft202012Validator(schema)
        sub = {"$schema": schema["$schema"], "$defs": schema["$defs"], "$ref": "#/$defs/" + name}
        _validators[name] = jsonschema.Draft202012Validator(sub)
    return _validators[name]


def validate(record):
    if not isinstance(record, dict) or record.get("type") not in _DEFS:
        return ["record of no known type: %r" % (record.get("type") if isinstance(record, dict) else record,)]
    v = _validator(_DEFS[record["type"]])
    errors = ["%s: %s" % ("/".join(str(p) for p in e.absolute_path) or "(record)", e.message[:300])
              for e in v.iter_errors(record)]
    # The whole schema's oneOf agrees (one branch, and only one, fits).
    if not errors and list(_validators[None].iter_errors(record)):
        errors.append("the schema's oneOf does not take the record")
    return errors
