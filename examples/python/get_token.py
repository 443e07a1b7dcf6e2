#!/usr/bin/env python3
"""Print an access token from authbrokerd, like `authctl token`, with the Python client
library clients/python (docs/integrations.md, "Python"):

    pip install ./clients/python
    python3 examples/python/get_token.py --resource https://api.example.com

Run from a checkout without installing anything: PYTHONPATH=clients/python/src. In a program
of your own the same is two lines:

    import authbroker
    headers = {"Authorization": authbroker.get_token("https://api.example.com").authorization}

The library finds the socket ($AUTHBROKER_SOCKET, else $XDG_RUNTIME_DIR/authbroker/socket),
sends nothing to a socket another user serves, bounds every call with a timeout and raises
typed errors whose message is the daemon's sentence with the next step.
"""
import argparse
import sys

import authbroker


def main():
    parser = argparse.ArgumentParser(description="Print an access token from authbrokerd.")
    parser.add_argument("--resource")
    parser.add_argument("--scope", action="append")
    parser.add_argument("--provider")
    parser.add_argument("--wait-for-sign-in", type=float, metavar="SECONDS",
                        help="wait that long for a browser sign-in instead of failing when one is needed")
    args = parser.parse_args()
    try:
        token = authbroker.get_token(args.resource, scopes=args.scope, provider=args.provider,
                                     wait_for_sign_in=args.wait_for_sign_in,
                                     on_sign_in=lambda answer: print(f"Sign in at {answer['authorization_url']}",
                                                                     file=sys.stderr))
    except authbroker.BrokerError as e:
        print(f"get_token: {e}", file=sys.stderr)
        return 1
    print(token.access_token)
    return 0


if __name__ == "__main__":
    sys.exit(main())
