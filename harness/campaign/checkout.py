"""A resumed campaign's FlagGems checkout: at the commit its finished rounds ran at, or refused."""

from __future__ import annotations

from pathlib import Path

from harness.campaign.document import Campaign
from harness.campaign.plan import SIDES, parse_unit_id
from harness.campaign.unit import side_base
from harness.contract.identity import git_state, read_identity
from harness.contract.states import RAN_TO_END
from harness.errors import UsageError
from harness.settings.spec import Settings


def ran_at(directory: Path, campaign: Campaign, side: str) -> set[str]:
    """The FlagGems commits `side`'s finished runs recorded (none for a tree not in git)."""
    found = set()
    for entry in campaign.units:
        if entry.status not in RAN_TO_END:
            continue
        unit = parse_unit_id(entry.id)
        ident = read_identity(directory / unit.op / side / f"r{unit.round}")
        if ident is not None and ident.flaggems_commit is not None:
            found.add(ident.flaggems_commit)
    return found


def check_same_commit(directory: Path, campaign: Campaign, settings: Settings) -> None:
    """UsageError, naming both commits, when the FlagGems tree a side's runs would use now is
    at another commit than its finished rounds ran at: a resume would mix rounds of two
    commits in one comparison. A tree outside git (the side trees of AXIS=flaggems, an
    unpacked archive) recorded no commit and is not checked."""
    for side in SIDES:
        before = ran_at(directory, campaign, side)
        if not before:
            continue
        tree = side_base(settings, campaign.axis, directory, side).flaggems_dir
        now = git_state(tree)["commit"] if tree is not None else None
        if before == {now}:
            continue
        said = f"at commit {now}" if now else "no git checkout"
        raise UsageError(
            f"FLAGGEMS_DIR={str(tree)!r} is {said} now, but side {side}'s finished rounds ran at "
            f"{', '.join(sorted(before))}: a resume would mix rounds of two FlagGems commits; "
            f"check out {sorted(before)[0]} again to resume, or start a new campaign")
