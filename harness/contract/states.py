"""The state words the harness writes into its files: one str-valued Enum per vocabulary."""

from __future__ import annotations

from enum import Enum


class Word(str, Enum):
    """A word of a vocabulary: equal to, hashed, formatted and written to JSON as its value."""

    def __str__(self) -> str:
        return str.__str__(self)


class UnitState(Word):
    """How a task ended, or where a unit of a campaign stands (campaign.json, batch.csv)."""

    OK = "ok"
    FAILED = "failed"
    ERROR = "error"
    NOT_RUN = "not_run"
    INTERRUPTED = "interrupted"
    TIMEOUT = "timeout"
    CRASHED = "crashed"
    SKIPPED = "skipped"
    SUBMITTED = "submitted"  # handed to a queue, not yet started
    RUNNING = "running"
    EXCLUDED = "excluded"  # its operator is left out by EXCLUDE: not run unless taken back


class CampaignState(Word):
    """A campaign's own state in campaign.json, from planned to done."""

    PLANNED = "planned"
    RUNNING = "running"
    SUBMITTED = "submitted"
    MEASURED = "measured"
    DONE = "done"
    INTERRUPTED = "interrupted"


class RunStatus(Word):
    """Whether a run (run_identity.json) or a campaign's result (ab.json) came to its end."""

    COMPLETE = "complete"
    INTERRUPTED = "interrupted"


# The unit states by the names code compares them with, as `signal` names its Signals.
OK, FAILED, ERROR, NOT_RUN = UnitState.OK, UnitState.FAILED, UnitState.ERROR, UnitState.NOT_RUN
INTERRUPTED, TIMEOUT, CRASHED = UnitState.INTERRUPTED, UnitState.TIMEOUT, UnitState.CRASHED
SKIPPED, SUBMITTED, RUNNING = UnitState.SKIPPED, UnitState.SUBMITTED, UnitState.RUNNING
EXCLUDED = UnitState.EXCLUDED
# The states a task ends in. A task in a FINISHED state is never run again; RAN_TO_END are the
# states in which a task that waits for it (`Task.after`) may start. The later states come
# last, so that a line counting every state keeps its earlier words where they were.
TASK_ENDS = (OK, FAILED, ERROR, NOT_RUN, INTERRUPTED, TIMEOUT, CRASHED, SKIPPED)
RAN_TO_END = (OK, FAILED)
PENDING = NOT_RUN  # a unit not run yet
# A unit in one of these states is never run again; any other state is run by --resume.
FINISHED = (OK, FAILED, SKIPPED, EXCLUDED)
# The states of a unit that a resume would still run: its operator's verdict is pending.
UNFINISHED = (NOT_RUN, INTERRUPTED, SUBMITTED, RUNNING)
UNIT_STATES, CAMPAIGN_STATES = tuple(UnitState), tuple(CampaignState)
RUN_STATUSES = tuple(RunStatus)
# A campaign in one of these states has not ended.
NOT_ENDED = (CampaignState.PLANNED, CampaignState.RUNNING, CampaignState.SUBMITTED,
             CampaignState.MEASURED)
