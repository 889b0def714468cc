# Vectors for inbound's Standard Webhooks v1a (Ed25519) check (testdata/standard-v1a.json).
# No official Standard Webhooks library on the registries here signs v1a (standardwebhooks
# 1.1.1 on npm and 1.1.0 on PyPI verify v1 only), so these are signed with the
# `cryptography` package's Ed25519 (RFC 8032), as the specification describes: "v1a," +
# base64(Ed25519("{id}.{timestamp}.{body}")), the public key as "whpk_" + base64(32 bytes).
# Regenerate: `python3 v1a.py > standard-v1a.json`.
import base64, json
import cryptography
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

seed = bytes(range(32))
key = Ed25519PrivateKey.from_private_bytes(seed)
public = key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
cases = []
for msg_id, timestamp, body in [
    ("msg_2KWPBgLlAfxdpx2AI54pPJ85f4W", 1674087231, '{"type":"invoice.paid","data":{"id":"in_1"}}'),
    ("msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, '{"test": 2432232314}'),
]:
    signature = key.sign(f"{msg_id}.{timestamp}.".encode() + body.encode())
    cases.append({"id": msg_id, "timestamp": timestamp, "body": body,
                  "signature": "v1a," + base64.b64encode(signature).decode()})
print(json.dumps({
    "generator": f"cryptography {cryptography.__version__} (Ed25519, RFC 8032)",
    "public_key": "whpk_" + base64.b64encode(public).decode(),
    "seed_hex": seed.hex(),
    "cases": cases,
}, indent=2))
