"""`WWW-Authenticate` challenges (RFC 9110 §11.6.1), and what a 401 or 403 answer's
Bearer or DPoP challenge asks a client to do (RFC 6750 §3, RFC 9728 §5.1, RFC 9470,
RFC 9449 §7.1 and §9). Standard library only; no input makes the parser raise."""
import re
from dataclasses import dataclass, field
from typing import Optional

_TCHAR = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_TOKEN68 = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
_OWS = " \t"


@dataclass
class Challenge:
    """One challenge: `scheme` lowercased (schemes are case-insensitive), `params` with
    lowercased names and unescaped values, or `token68` for a scheme that takes one."""

    scheme: str
    params: dict = field(default_factory=dict)
    token68: Optional[str] = None


def _skip_ows(s, i):
    while i < len(s) and s[i] in _OWS:
        i += 1
    return i


def _quoted(s, i):
    """The quoted-string at s[i] == '"': (value, end), or (None, len(s)) when unterminated."""
    out, i = [], i + 1
    while i < len(s):
        c = s[i]
        if c == '"':
            return "".join(out), i + 1
        if c == "\\" and i + 1 < len(s):
            i += 1
            c = s[i]
        out.append(c)
        i += 1
    return None, len(s)


def _next_element(s, i):
    """Past the next comma outside a quoted-string (the recovery from a malformed element)."""
    while i < len(s):
        if s[i] == '"':
            _, i = _quoted(s, i)
        elif s[i] == ",":
            return i + 1
        else:
            i += 1
    return i


def _at_end_of_element(s, i):
    i = _skip_ows(s, i)
    return i >= len(s) or s[i] == ","


def _param_value(s, i):
    """The token or quoted-string at s[i]: (value, end), or (None, i) if there is none."""
    if i < len(s) and s[i] == '"':
        return _quoted(s, i)
    m = _TCHAR.match(s, i)
    return (m.group(), m.end()) if m else (None, i)


def parse(header):
    """The challenges of a `WWW-Authenticate` value, a list of :class:`Challenge`.

    Takes one value or a list of them (a response may carry the header several times).
    Elements that do not parse are skipped, and so are params that follow a scheme that
    did not parse; a param a challenge repeats keeps its first value."""
    if header is None:
        return []
    s = header if isinstance(header, str) else ", ".join(v for v in header if isinstance(v, str))
    challenges, current, i = [], None, 0
    while i < len(s):
        i = _skip_ows(s, i)
        if i < len(s) and s[i] == ",":
            i += 1
            continue
        m = _TCHAR.match(s, i)
        if m is None:
            current, i = None, _next_element(s, i)
            continue
        name, j = m.group(), m.end()
        k = _skip_ows(s, j)
        if k < len(s) and s[k] == "=":  # an auth-param of the current challenge
            value, end = _param_value(s, _skip_ows(s, k + 1))
            if current is not None and value is not None and _at_end_of_element(s, end):
                current.params.setdefault(name.lower(), value)
            i = _next_element(s, end)
            continue
        # A new challenge: its scheme, then 1*SP and a token68 or its first param.
        if j < len(s) and s[j] not in _OWS + ",":
            current, i = None, _next_element(s, j)
            continue
        t = _TOKEN68.match(s, k)
        if k > j and t and _at_end_of_element(s, t.end()):  # `name=` before a comma is no param
            challenges.append(Challenge(name.lower(), {}, t.group()))
            current, i = None, _next_element(s, t.end())  # a token68 takes no params
            continue
        current = Challenge(name.lower())
        challenges.append(current)
        i = k
    return challenges


# -- What a 401 or 403 asks for --------------------------------------------------------

@dataclass(frozen=True)
class Decision:
    """What to do about a 401 or 403 answer. `action` is one of

    - ``"nonce"``: send again with a DPoP proof carrying `nonce` (RFC 9449 §9);
    - ``"user_authentication"``: only a new sign-in with `acr_values` and/or `max_age`
      helps (RFC 9470); nothing is to be sent again before it;
    - ``"more_scopes"``: send again with a token for `scopes`, the union of the token's
      and those the server names (RFC 6750 §3.1 ``insufficient_scope``);
    - ``"new_token"``: reject the token and send again with a fresh one (``invalid_token``);
    - ``"discover"``: the resource's metadata, at `resource_metadata` or (None) its
      well-known URL, names its authorization server (RFC 9728 §5.1): resolve it, then
      send again with a token from there;
    - None: nothing to try.

    `reason` says what the server answered, in words for an error or a log line (never
    with a token); `error` is the challenge's error code."""

    action: Optional[str]
    reason: str
    error: Optional[str] = None
    scopes: Optional[tuple] = None
    nonce: Optional[str] = None
    resource_metadata: Optional[str] = None
    acr_values: Optional[str] = None
    max_age: Optional[str] = None


def _printable(text, limit=200):
    text = "".join(c for c in text if c.isprintable())
    return text if len(text) <= limit else text[:limit] + "…"


def describe(status, challenge):
    """`401 invalid_token: "The access token expired"`: a challenge in words."""
    if challenge is None:
        return f"{status} without a Bearer or DPoP challenge"
    p = challenge.params
    error = p.get("error")
    if error is None:
        return f"{status} without an error code"
    words = f"{status} {_printable(error, 64)}"
    if p.get("error_description"):
        words += f': "{_printable(p["error_description"])}"'
    named = [f'{k} "{_printable(p[k])}"' for k in ("scope", "acr_values", "max_age") if p.get(k)]
    return words + (f" ({', '.join(named)})" if named else "")


def decide(status, www_authenticate, *, sent_token=True, scopes=None, dpop=False, dpop_nonce=None):
    """What a 401 or 403 answer's challenges ask for: a :class:`Decision`, or None for
    another status.

    `www_authenticate` is the header's value (or values, or parsed challenges);
    `sent_token` whether the request carried a token; `scopes` the token's scopes (a list,
    or the space-separated `scope` of its answer); `dpop` whether it is DPoP-bound, and
    `dpop_nonce` the answer's `DPoP-Nonce`. Only Bearer and DPoP challenges count, the
    scheme of the token first. An error code decides before `resource_metadata`: that
    says where the server's metadata is, not what is wrong with the token. A 401 to a
    request without a token asks for discovery, at the well-known URL when the challenge
    names none."""
    if status not in (401, 403):
        return None
    if isinstance(www_authenticate, list) and all(isinstance(c, Challenge) for c in www_authenticate):
        challenges = www_authenticate
    else:
        challenges = parse(www_authenticate)
    first = "dpop" if dpop else "bearer"
    ours = sorted((c for c in challenges if c.scheme in ("bearer", "dpop")), key=lambda c: c.scheme != first)
    with_error = [c for c in ours if c.params.get("error")]
    c = with_error[0] if with_error else (ours[0] if ours else None)
    reason = describe(status, c)
    error = c.params.get("error") if c else None
    metadata = next((x.params["resource_metadata"] for x in ours if x.params.get("resource_metadata")), None)
    if error == "use_dpop_nonce":
        if dpop and dpop_nonce:
            return Decision("nonce", reason, error, nonce=dpop_nonce)
        return Decision(None, reason + (", and no DPoP-Nonce header" if dpop else ", to a token that is no DPoP token"),
                        error)
    if error == "insufficient_user_authentication":
        acr, age = c.params.get("acr_values"), c.params.get("max_age")
        return Decision("user_authentication", reason, error, acr_values=_printable(acr) if acr else None,
                        max_age=age if age and re.fullmatch("[0-9]+", age) else None)
    if error == "insufficient_scope":
        return _more_scopes(reason, c.params.get("scope"), scopes)
    if not sent_token and status == 401 and error in (None, "invalid_token"):
        return Decision("discover", reason, error, resource_metadata=metadata)
    if error == "invalid_token":
        return Decision("new_token", reason, error)
    if error is None and metadata and status == 401:
        return Decision("discover", reason, None, resource_metadata=metadata)
    return Decision(None, reason, error)


def _more_scopes(reason, asked, scopes):
    have = scopes.split() if isinstance(scopes, str) else list(scopes or ())
    wanted = [s for s in (asked or "").split() if s not in have]
    if not asked:
        return Decision(None, reason + ", naming no scope to ask for", "insufficient_scope")
    if not wanted:
        return Decision(None, reason + ", and the token has those scopes already", "insufficient_scope")
    return Decision("more_scopes", reason, "insufficient_scope", scopes=tuple(dict.fromkeys(have + wanted)))
