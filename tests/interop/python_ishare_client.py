"""python-ishare 0.0.3 as a real client of a running gateway and the testbed's scheme owner.

Run by tests/interop.rs, which starts both and passes, in the environment:
  GATEWAY_URL, GATEWAY_ID, SO_URL, SO_ID, CLIENT_ID   where they are and who is who
  CLIENT_KEY, CLIENT_CHAIN        the client's PEM key and chain (leaf first, up to the root)
  GATEWAY_CHAIN, SO_CHAIN         the PEM chains the gateway and the scheme owner sign with
  ROOT                            the test PKI's root (PEM): TLS and the trusted list
  GATEWAY_ASSERTION               a client assertion of the gateway to the scheme owner (30 s)

Prints one JSON object per check ({"check", "ok", "detail"}) and exits 1 when any failed.
"""

import json
import os
import sys
from pathlib import Path

E = os.environ
# python-ishare calls requests without verify=: requests reads the CA bundle from here.
os.environ["REQUESTS_CA_BUNDLE"] = E["ROOT"]
os.environ["NO_PROXY"] = "127.0.0.1,localhost,::1"

from cryptography.hazmat.primitives import hashes  # noqa: E402
from cryptography.hazmat.primitives.serialization import load_pem_private_key  # noqa: E402
from cryptography.x509 import load_pem_x509_certificate, load_pem_x509_certificates  # noqa: E402
from python_ishare import (  # noqa: E402
    CommonBaseClient,
    ISHARESatelliteClient,
    create_jwt,
    validate_client_assertion,
)

ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
CLIENT_ID = E["CLIENT_ID"]
KEY = load_pem_private_key(Path(E["CLIENT_KEY"]).read_bytes(), password=None)
CHAIN = load_pem_x509_certificates(Path(E["CLIENT_CHAIN"]).read_bytes())
ROOT = load_pem_x509_certificate(Path(E["ROOT"]).read_bytes())
failed = []


def check(name, run):
    try:
        detail = run()
        ok = True
    except Exception as exc:  # every failure is a reported result, not a crash
        detail, ok = f"{type(exc).__name__}: {exc}", False
        failed.append(name)
    print(json.dumps({"check": name, "ok": ok, "detail": str(detail)}), flush=True)


def expect(condition, message):
    if not condition:
        raise AssertionError(message)


def assertion_for(audience):
    return lambda: create_jwt(
        payload={"iss": CLIENT_ID, "sub": CLIENT_ID, "aud": audience},
        private_key=KEY,
        x5c_certificate_chain=CHAIN,
    )


def client(cls, url, party, chain):
    certs = load_pem_x509_certificates(Path(E[chain]).read_bytes())
    return cls(
        target_domain=url,
        target_public_key=certs,
        client_eori=CLIENT_ID,
        json_web_token=assertion_for(party),
    )


def signed_by(payload, issuer, audience):
    expect(payload.get("iss") == issuer, f"iss {payload.get('iss')!r}, not {issuer!r}")
    expect(payload.get("aud") == audience, f"aud {payload.get('aud')!r}, not {audience!r}")


def main():
    gateway_id, so_id = E["GATEWAY_ID"], E["SO_ID"]
    gateway = client(CommonBaseClient, E["GATEWAY_URL"], gateway_id, "GATEWAY_CHAIN")
    so = client(ISHARESatelliteClient, E["SO_URL"], so_id, "SO_CHAIN")
    assertion = E["GATEWAY_ASSERTION"]

    def own_assertion():
        payload = validate_client_assertion(
            client_id=gateway_id,
            client_assertion=assertion,
            audience=so_id,
            grant_type="client_credentials",
            scope="iSHARE",
            client_assertion_type=ASSERTION_TYPE,
            strict_eori=True,
        )
        return f"jti {payload['jti']}"

    check("gateway_assertion_valid", own_assertion)

    def token():
        answer = gateway.request_access_token()
        expect(answer.get("token_type") == "Bearer", f"token_type {answer.get('token_type')!r}")
        expect(answer.get("expires_in", 0) > 0, f"expires_in {answer.get('expires_in')!r}")
        gateway._access_token = answer
        return f"expires_in {answer['expires_in']}"

    check("gateway_token", token)

    def capabilities(use_token):
        def run():
            payload = gateway.get_capabilities(use_token=use_token)
            signed_by(payload, gateway_id, CLIENT_ID if use_token else None)
            info = payload["capabilities_info"]
            expect(info["party_id"] == gateway_id, f"party_id {info['party_id']!r}")
            features = info["supported_versions"][0]["supported_features"][0]
            expect(bool(features.get("restricted")) == use_token, f"features {features}")
            return f"{len(features.get('public', []))} public features"

        return run

    check("gateway_capabilities_anonymous", capabilities(False))
    check("gateway_capabilities_restricted", capabilities(True))

    def versions(use_token):
        def run():
            payload = so.get_versions(use_token=use_token)
            signed_by(payload, so_id, CLIENT_ID if use_token else None)
            names = [v["version_name"] for v in payload["versions_info"]]
            expect(names, "no versions")
            return f"versions {names}"

        return run

    check("scheme_owner_versions_anonymous", versions(False))
    check("scheme_owner_versions_restricted", versions(True))

    def trusted_list():
        payload = so.get_trusted_list()
        signed_by(payload, so_id, CLIENT_ID)
        subject = ROOT.subject.rfc4514_string()
        fingerprint = ROOT.fingerprint(hashes.SHA256()).hex().upper()
        entries = payload["trusted_list"]
        expect(
            any(e["subject"] == subject and e["certificate_fingerprint"] == fingerprint for e in entries),
            f"no entry {subject} {fingerprint} in {entries}",
        )
        return subject

    check("scheme_owner_trusted_list", trusted_list)

    def verify_gateway():
        so.verify_json_web_token(
            client_id=gateway_id,
            client_assertion=assertion,
            audience=so_id,
            grant_type="client_credentials",
            scope="iSHARE",
            client_assertion_type=ASSERTION_TYPE,
        )
        return "assertion valid, its root on the trusted list, the party active"

    check("scheme_owner_verifies_gateway_assertion", verify_gateway)

    def verify_client():
        result = so.verify_party(party_eori=CLIENT_ID)
        return f"{result['parties_info']['count']} party"

    check("scheme_owner_verify_party", verify_client)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
