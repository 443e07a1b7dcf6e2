"""A device sign-in (RFC 8628) approved the way a user would: read the code `authctl login
--device` shows, and approve it in Glewlwyd's own login API."""
import re
import time


def approve_device_login(p, gl, client, user, log_text):
    """Approves in Glewlwyd, as `user` would in a browser, the device sign-in that the
    `authctl login --device` process `p` shows; its stdout once it succeeded."""
    code = None
    seen = []
    deadline = time.time() + 30
    while code is None and time.time() < deadline:
        line = p.stderr.readline()
        if not line:
            break
        seen.append(line)
        m = re.search(r"enter the code ([A-Za-z0-9-]+)", line)
        if m:
            code = m.group(1)
    if code is None:
        p.kill()
        raise AssertionError("authctl login printed no user code:\n" + "".join(seen) + log_text())
    session = gl.login_session(user)
    gl.approve_device(session, code, gl.client_id(client), ["openid", "profile", "email", "offline_access"])
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, f"login failed ({p.returncode}): {''.join(seen)}{err}\n{log_text()}"
    return out
