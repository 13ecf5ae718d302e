"""What a machine sends of itself (`POST /v1/machines/report`) and what it is answered."""

from typing import Annotated, Self

from pydantic import BaseModel, ConfigDict, Field, StrictInt, model_validator

from app.api.schemas import Note
from app.core.errors import field_error
from app.core.states import MachineFailure, MachineStage
from app.services.machine_reports import MachineReport

MAX_BYTES_REPORTED = 2**53  # far past any model's weights; a JSON number stays exact below it
Bytes = Annotated[StrictInt, Field(ge=0, le=MAX_BYTES_REPORTED)]


class MachineReportIn(BaseModel):
    """One stage a machine reached. Only `stage` is needed; `bytes_done` and `bytes_total`
    while `downloading`, `cause` with `failed`."""

    model_config = ConfigDict(extra="forbid")

    stage: MachineStage
    detail: Note | None = Field(
        default=None,
        description="What the machine says: the driver's version, the engine's last log lines.",
    )
    bytes_done: Bytes | None = None
    bytes_total: Bytes | None = None
    cause: MachineFailure | None = Field(
        default=None, description="With `failed`: why (`other` when none of these)."
    )
    time_to_first_token_seconds: (
        Annotated[
            float,
            Field(ge=0, le=86_400, allow_inf_nan=False),
        ]
        | None
    ) = Field(
        default=None,
        description="With `ready`: how long the first one-token completion took, in seconds.",
    )

    @model_validator(mode="after")
    def _cause_with_failed(self) -> Self:
        if self.cause is not None and self.stage is not MachineStage.FAILED:
            raise field_error("cause", "is for a `failed` report only")
        ready = self.stage is MachineStage.READY
        if self.time_to_first_token_seconds is not None and not ready:
            raise field_error("time_to_first_token_seconds", "is for a `ready` report only")
        if (
            self.bytes_done is not None
            and self.bytes_total is not None
            and self.bytes_done > self.bytes_total
        ):
            raise field_error("bytes_done", "is more than bytes_total")
        return self

    def report(self) -> MachineReport:
        """The report as the service takes it."""
        cause = self.cause
        if self.stage is MachineStage.FAILED and cause is None:
            cause = MachineFailure.OTHER
        return MachineReport(
            stage=self.stage,
            detail=self.detail or None,
            bytes_done=self.bytes_done,
            bytes_total=self.bytes_total,
            cause=cause,
            time_to_first_token_seconds=self.time_to_first_token_seconds,
        )


class MachineReportAnswer(BaseModel):
    """The report was recorded: the stage the order now shows."""

    stage: MachineStage
