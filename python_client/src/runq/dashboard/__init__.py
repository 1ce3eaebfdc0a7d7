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
    ap.add_argument("--refresh", type=float, default=5.0, metavar="SECONDS",
                    help="how often the overview refreshes itself (default 5)")
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    """Serve the runq dashboard (read-only unless --allow-actions)."""
    ap = parser()
    args = ap.parse_args(argv)
    if not args.database_url:
        ap.error("no database: pass --database-url or set RUNQ_DATABASE_URL")
    if not _loopback(args.host):
        print(f"runq dashboard: listening on {args.host}, beyond this machine; the dashboard "
              "has no login of its own", file=sys.stderr)

    import uvicorn

    from runq.dashboard.app import create_app

    app = create_app(args.database_url, allow_actions=args.allow_actions,
                     refresh_seconds=args.refresh)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0


if __name__ == "__main__":
    sys.exit(main())
