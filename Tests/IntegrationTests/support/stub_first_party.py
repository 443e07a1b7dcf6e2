"""OAuth 2.0 for First-Party Applications (draft-ietf-oauth-first-party-apps) on the STUB
provider (stub_provider.py). Neither Glewlwyd nor any other provider these tests run
implements the draft, so this STUB stands in with the draft's messages: its authorization
challenge endpoint asks, one `insufficient_authorization` answer (with `auth_session`) at a
time, for the user name, the password, a one-time code sent by e-mail and an MFA code, then
answers `authorization_code`; the token endpoint redeems that code only with the PKCE
verifier whose S256 challenge the first request carried.

What to ask next is not in the draft: the stub says it in `next` (`password` or `otp`) and
`message` (the question's label), as docs/sign-in.md describes."""
import base64
import hashlib
import secrets

PATH = "/challenge"
USERNAME = "stub-user"
PASSWORD = "stub-password-8d2f"
EMAIL_CODE = "em-314159-code"
MFA_CODE = "mfa-271828-code"

# What each step checks, and what the stub asks for after it.
STEPS = [("username", USERNAME, "password", None),
         ("password", PASSWORD, "otp", "Code sent by e-mail"),
         ("otp", EMAIL_CODE, "otp", "MFA code"),
         ("otp", MFA_CODE, None, None)]


def enable(stub, redirect_to_web=False):
    """Makes `stub` offer the authorization challenge endpoint; returns the list of forms
    it received (tests check what was sent)."""
    forms = []
    sessions = {}  # auth_session -> {"step": index, "challenge": str, "resources": list}

    def challenge(form):
        forms.append(form)
        one = {k: v[0] for k, v in form.items() if len(v) == 1}
        if one.get("client_id") != stub.client_id:
            return 400, {"error": "invalid_client"}
        if one.get("code_challenge_method") != "S256" or not one.get("code_challenge"):
            return 400, {"error": "invalid_request", "error_description": "PKCE with S256 is required"}
        if redirect_to_web:
            return 400, {"error": "redirect_to_web", "request_uri": "urn:ietf:params:oauth:request_uri:stub"}
        key = one.get("auth_session")
        if key is None:
            state = {"step": 0, "challenge": one["code_challenge"], "resources": form.get("resource", [])}
        else:
            state = sessions.pop(key, None)
            if state is None:
                return 400, {"error": "invalid_session"}
        name, expected, next_name, message = STEPS[state["step"]]
        if one.get(name) != expected:
            return 400, {"error": "access_denied", "error_description": f"the {name} is wrong"}
        state["step"] += 1
        if next_name is None:
            code = "stub-fpa-code-" + secrets.token_urlsafe(16)
            with stub.lock:
                stub.grants[code] = state["resources"]
                stub.issued.append(code)
                challenges[code] = state["challenge"]
            return 200, {"authorization_code": code}
        session = "stub-as-" + secrets.token_urlsafe(16)
        sessions[session] = state
        answer = {"error": "insufficient_authorization", "auth_session": session, "next": next_name}
        if message:
            answer["message"] = message
        return 400, answer

    challenges = {}  # code -> its S256 challenge

    def verifier_matches(code, verifier):
        if code not in challenges:
            return True  # not a code of this endpoint
        digest = hashlib.sha256(verifier.encode()).digest()
        return base64.urlsafe_b64encode(digest).rstrip(b"=").decode() == challenges.pop(code)

    stub.post_handlers[PATH] = challenge
    stub.discovery_extra["authorization_challenge_endpoint"] = stub.issuer + PATH
    stub.code_verifier_check = verifier_matches
    return forms
