"""RFC 8693 token exchange on the STUB provider (stub_provider.py). Neither Glewlwyd nor
any other provider these tests run implements token exchange, so this STUB stands in: it
checks the form as RFC 8693 §2.1 has it and mints a new access token for the audience."""
import secrets

GRANT = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS = "urn:ietf:params:oauth:token-type:access_token"
ID = "urn:ietf:params:oauth:token-type:id_token"


def enable(stub, life=600):
    """Makes `stub` accept token exchange; returns the list of (form, subject token kind)
    of every exchange it answered."""
    exchanges = []

    def exchange(form):
        one = {k: v[0] for k, v in form.items() if len(v) == 1}
        subject, kind = one.get("subject_token"), one.get("subject_token_type")
        if not subject or kind not in (ACCESS, ID) or not (one.get("audience") or one.get("resource")):
            return 400, {"error": "invalid_request", "error_description": "subject_token, subject_token_type and audience or resource are required"}
        with stub.lock:
            known = subject in stub.access and subject not in stub.revoked
        if kind == ACCESS and not known:
            return 400, {"error": "invalid_grant", "error_description": "the subject token is not valid"}
        if kind == ID and subject.count(".") != 2:
            return 400, {"error": "invalid_grant", "error_description": "the subject token is not an ID token"}
        token = "stub-xt-" + secrets.token_urlsafe(24)
        with stub.lock:
            stub.access[token] = [one.get("resource")] if one.get("resource") else []
            stub.issued.append(token)
        exchanges.append((form, "access" if kind == ACCESS else "id"))
        return 200, {"access_token": token, "issued_token_type": one.get("requested_token_type", ACCESS),
                     "token_type": "Bearer", "expires_in": life}

    stub.grant_handlers[GRANT] = exchange
    return exchanges
