"""POSTs one Retention Messaging request with Python's urllib, as Apple's servers would. Run by RetentionHTTPTests:

    retention_post.py URL BODY_FILE

Prints {"status": int, "contentType": str, "body": <the JSON answer>} on stdout."""
import json
import sys
import urllib.error
import urllib.request

url, body_file = sys.argv[1:3]
with open(body_file, "rb") as f:
    body = f.read()
request = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": "application/json"})
try:
    with urllib.request.urlopen(request, timeout=10) as response:
        status, headers, data = response.status, response.headers, response.read()
except urllib.error.HTTPError as error:
    status, headers, data = error.code, error.headers, error.read()
json.dump({"status": status, "contentType": headers.get("Content-Type", ""), "body": json.loads(data)}, sys.stdout)
