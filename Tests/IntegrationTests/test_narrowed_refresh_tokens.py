"""Refresh tokens narrowed to one resource (issue 10, item 2), against the real Glewlwyd with
rotation: after a refresh for resource R1 the rotated refresh token grants R1 only, and R2
gets `invalid_target`. Without configuration the user is told what is true; with
`refresh_tokens = "one-per-resource"` and one sign-in per resource, both keep working.

No test prints a token: tokens are compared through `fingerprint()`."""

from conftest import API, GIT, decode_jwt, fingerprint, stored_item


def login_device(d, *args, user="alice"):
    """`authctl login --device …` for one sign-in, approved through Glewlwyd."""
    d.login_device(user, *args)


def token(d, resource):
    return d.ctl("token", "--provider", d.name, "--resource", resource)


def narrowing_daemon(daemon_factory, rule=None):
    # refresh_margin at its maximum: every request refreshes, so every request uses (and
    # rotates) a refresh token, as an hour of use would.
    d = daemon_factory(refresh_margin=86400)
    if rule:
        with open(d.config, "a") as f:
            f.write(f'refresh_tokens = "{rule}"\n')
    return d.start()


def test_without_configuration_the_user_is_told_the_provider_narrowed_the_refresh_token(daemon_factory):
    d = narrowing_daemon(daemon_factory)
    d.login_device("alice")
    first = token(d, API)
    assert first.returncode == 0, first.stderr
    refused = token(d, GIT)
    assert refused.returncode != 0
    message = refused.stderr
    assert f"narrowed this account's refresh token to {API} when it rotated it, so it no longer grants {GIT}" in message
    assert 'set refresh_tokens = "one-per-resource"' in message and f"--resource {GIT}" in message
    assert "add it to resources" not in message, "the resource is configured: that advice does not help"
    # The refused resource did not cost the account: the narrowed refresh token still works.
    assert token(d, API).returncode == 0


def test_one_refresh_token_per_resource_keeps_both_resources_working(daemon_factory, glewlwyd):
    d = narrowing_daemon(daemon_factory, rule="one-per-resource")
    login_device(d, "--resource", API)
    login_device(d, "--resource", GIT)

    seen = []
    for _ in range(4):  # four refreshes of each chain, in alternation
        for resource in (API, GIT):
            r = token(d, resource)
            assert r.returncode == 0, f"{resource}: {r.stderr}\n{d.log_text()}"
            assert decode_jwt(r.stdout.strip())[1]["aud"] in (resource, [resource])
            seen.append(r.stdout.strip())
    assert len({fingerprint(t) for t in seen}) == len(seen), "each request was a refresh"
    # Glewlwyd keeps earlier access tokens alive after later refreshes: `access_tokens =
    # "independent"` (as conftest configures it) is true for it (docs/providers.md).
    assert glewlwyd.access_token_enabled(seen[0]) is True

    # The per-resource refresh token lives in the account's Secret Service item and is
    # found again after a restart.
    attrs, secret = stored_item(d.name)
    assert set(secret.get("resource_refresh_tokens", {})) == {GIT}
    d.restart()
    for resource in (GIT, API, GIT):
        r = token(d, resource)
        assert r.returncode == 0, f"{resource} after restart: {r.stderr}\n{d.log_text()}"
    assert not any(t in d.log_text() for t in seen)


def test_one_per_resource_says_which_resource_still_needs_its_sign_in(daemon_factory):
    d = narrowing_daemon(daemon_factory, rule="one-per-resource")
    login_device(d, "--resource", API)
    assert token(d, API).returncode == 0
    r = token(d, GIT)
    assert r.returncode != 0
    assert f"sign in once for this resource with `authctl login --provider {d.name} --resource {GIT}`" in r.stderr
    login_device(d, "--resource", GIT)
    assert token(d, GIT).returncode == 0 and token(d, API).returncode == 0


def test_logout_revokes_every_resources_refresh_token(daemon_factory, glewlwyd):
    # The confidential client may revoke at Glewlwyd (the public one gets 401).
    d = daemon_factory(client="authbroker-confidential")
    with open(d.config, "a") as f:
        f.write('refresh_tokens = "one-per-resource"\n')
    d.start()
    login_device(d, "--resource", API)
    login_device(d, "--resource", GIT)
    _, secret = stored_item(d.name)
    held = [secret["refresh_token"], *secret["resource_refresh_tokens"].values()]
    assert len(held) == 2 and all(glewlwyd.refresh_token_enabled(t) for t in held)
    r = d.ctl("logout", "--provider", d.name)
    assert r.returncode == 0, r.stderr
    assert [glewlwyd.refresh_token_enabled(t) for t in held] == [False, False]
    assert stored_item(d.name) is None
