"""Released sqitch scripts stay byte for byte: every deploy, revert and verify
script of a change before the plan's last tag hashes as tests/released.sha256
recorded it when its release was tagged (scripts/gen-released). A database
deployed at that tag ran those bytes; a later change is a rework or a new
change, never an edit."""
import runpy

from pgutil import ROOT

gen = runpy.run_path(str(ROOT / "scripts" / "gen-released"))


def test_released_scripts_are_as_released() -> None:
    now, kept = gen["released"](), gen["recorded"]()
    assert not set(now) - set(kept), (
        "scripts released by a tag are not recorded: run scripts/gen-released\n"
        + "\n".join(sorted(set(now) - set(kept))))
    assert not set(kept) - set(now), "recorded scripts the plan no longer has before its last tag"
    edited = [key for key in now if now[key] != kept[key]]
    assert not edited, ("released scripts were edited (rework the change instead):\n"
                        + "\n".join(edited))

