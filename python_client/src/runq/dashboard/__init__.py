"""``runq dashboard``: the web dashboard and ``/metrics`` (the extra
``runq[dashboard]``: Starlette, Jinja2, uvicorn, prometheus-client)."""

from __future__ import annotations

import argparse
import ipaddress
import os
import sys
from collections.abc import Sequence

__all__ = ["main", "parser"]


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def parser() -> argparse.ArgumentParser:
    """The options of ``runq dashboard``."""
    ap = argparse.ArgumentParser(
        prog="runq dashboard", description=main.__doc__,
        epilog="The database role must be a member of runq_observer (pages and /metrics) "
               "and, with --allow-actions, of runq_admin.")
    ap.add_argument("--database-url", default=os.environ.get("RUNQ_DATABASE_URL"),
                    metavar="URL", help="the database (default: $RUNQ_DATABASE_URL)")
    ap.add_argument("--host", default="127.0.0.1",
                    help="address to listen on (default 127.0.0.1: this machine only)")
    ap.add_argument("--port", type=int, default=8080, help="port (default 8080)")
    ap.add_argument("--allow-actions", action="store_true",
                    help="add cancel, redrive, pause and resume (POST forms, under runq_admin)")
    ap.add_argument("--refresh", type=_positive, default=5.0, metavar="SECONDS",
                    help="how often the overview refreshes itself (default 5)")
    ap.add_argument("--server-name", action="append", default=[], metavar="NAME",
                    help="a host name the dashboard answers to beside 127.0.0.1 and "
                         "localhost (repeatable; default: --host unless a wildcard)")
    ap.add_argument("--no-login-on-the-network", action="store_true",
                    help="allow --allow-actions with a --host beyond this machine, where "
                         "anyone who can reach the port may cancel and redrive runs")
    return ap


def _positive(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be more than 0, got {text}")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    """Serve the runq dashboard (read-only unless --allow-actions)."""
    ap = parser()
    args = ap.parse_args(argv)
    if not args.database_url:
        ap.error("no database: pass --database-url or set RUNQ_DATABASE_URL")
    if not _loopback(args.host):
        if args.allow_actions and not args.no_login_on_the_network:
            ap.error(f"--allow-actions on {args.host} would let anyone who reaches the port "
                     "cancel and redrive runs (the dashboard has no login); add "
                     "--no-login-on-the-network if that is meant")
        print(f"runq dashboard: listening on {args.host}, beyond this machine; the dashboard "
              "has no login of its own", file=sys.stderr)

    import uvicorn

    from runq.dashboard.app import LOOPBACK_HOSTS, create_app

    names = list(args.server_name)
    if args.host not in ("0.0.0.0", "::") and not _loopback(args.host):
        names.append(args.host)
    app = create_app(args.database_url, allow_actions=args.allow_actions,
                     refresh_seconds=args.refresh, hosts=(*LOOPBACK_HOSTS, *names))
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0


if __name__ == "__main__":
    sys.exit(main())
