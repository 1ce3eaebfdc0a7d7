"""docs/API.md is generated from the catalog (scripts/gen-api-doc); a change
to a function's signature, grants or COMMENT must come with `make docs`."""
import sys

from pgutil import ROOT, run


def test_api_doc_is_current(db_url: str) -> None:
    # db_url is a clone of the session's database loaded from sql/runq.sql.
    generated = run(sys.executable, "scripts/gen-api-doc", "--db", db_url, "-").stdout
    path = ROOT / "docs" / "API.md"
    fresh = path.exists() and path.read_text() == generated
    assert fresh, "docs/API.md is stale: run `make docs` and commit it"
