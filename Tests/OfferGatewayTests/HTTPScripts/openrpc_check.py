"""Validates an OpenRPC document (file argv[1]) against the OpenRPC 1.x meta-schema kept beside this script, and
every method's param and result schemas against JSON Schema draft 7. Exits 0 when valid, else prints why, exit 1."""
import json
import os
import sys

import jsonschema
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT7

here = os.path.dirname(os.path.abspath(__file__))
meta = json.load(open(os.path.join(here, "openrpc-meta-schema.json")))
document = json.load(open(sys.argv[1]))
# The meta-schema refers to draft 7 by its https URI; resolve it to jsonschema's own copy (no network).
draft7 = Resource.from_contents(jsonschema.Draft7Validator.META_SCHEMA, default_specification=DRAFT7)
registry = Registry().with_resources([
    ("https://json-schema.org/draft-07/schema#", draft7), ("https://json-schema.org/draft-07/schema", draft7),
    ("http://json-schema.org/draft-07/schema#", draft7), ("http://json-schema.org/draft-07/schema", draft7),
])
validator = jsonschema.Draft7Validator(meta, registry=registry)
errors = sorted(validator.iter_errors(document), key=lambda e: list(e.path))
for error in errors[:20]:
    print("/".join(str(p) for p in error.path), error.message[:300])
names = [m["name"] for m in document["methods"]]
if len(names) != len(set(names)):
    print("duplicate method names")
    errors.append("duplicate")
for method in document["methods"]:
    for descriptor in method["params"] + [method["result"]]:
        try:
            jsonschema.Draft7Validator.check_schema(descriptor["schema"])
        except jsonschema.exceptions.SchemaError as error:
            print(method["name"], descriptor["name"], error.message[:200])
            errors.append(error)
sys.exit(1 if errors else 0)
