"""Parses a Prometheus text exposition (file argv[1]) with prometheus_client's parser and prints, as JSON, every
sample: {"families": {name: type}, "samples": [[name, labels, value], ...]}. Exits 1 if it does not parse."""
import json
import sys

from prometheus_client.parser import text_string_to_metric_families

text = open(sys.argv[1]).read()
families = {}
samples = []
for family in text_string_to_metric_families(text):
    families[family.name] = family.type
    for sample in family.samples:
        samples.append([sample.name, sample.labels, sample.value])
print(json.dumps({"families": families, "samples": samples}))
