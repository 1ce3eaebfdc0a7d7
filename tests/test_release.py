"""One version for the release: the schema's newest sqitch tag, the Python
package, the TypeScript package and the newest entry of CHANGELOG.md agree,
so a user who reads one knows the others."""
import json
import re
import tomllib

from pgutil import ROOT


def test_the_schema_the_packages_and_the_changelog_name_one_version() -> None:
    tags = re.findall(r"^@v(\S+)", (ROOT / "sqitch.plan").read_text(), re.MULTILINE)
    python = tomllib.loads((ROOT / "python_client" / "pyproject.toml").read_text())
    typescript = json.loads((ROOT / "clients" / "typescript" / "package.json").read_text())
    changelog = re.findall(r"^## \[(\d[^\]]*)\]", (ROOT / "CHANGELOG.md").read_text(),
                           re.MULTILINE)
    assert {
        "sqitch tag": tags[-1],
        "python_client": python["project"]["version"],
        "clients/typescript": typescript["version"],
        "CHANGELOG.md": changelog[0],
    } == dict.fromkeys(("sqitch tag", "python_client", "clients/typescript", "CHANGELOG.md"),
                       tags[-1])
