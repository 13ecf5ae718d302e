"""What machines say of themselves: the stage their start-up script reached, authorized by the
token made for their create attempt (not an account's API key)."""

from fastapi import APIRouter

from app.api.deps import BearerDep, SessionDep
from app.api.machine_schemas import MachineReportAnswer, MachineReportIn
from app.api.strict_json import StrictJsonRoute
from app.core.clock import utcnow
from app.core.errors import Unauthorized
from app.services import machine_reports

router = APIRouter(route_class=StrictJsonRoute, prefix="/v1/machines", tags=["machines"])


@router.post("/report")
async def report(
    body: MachineReportIn, session: SessionDep, credentials: BearerDep
) -> MachineReportAnswer:
    """A machine reports a stage it reached (`booted`, `downloading`, `ready`, `failed`...),
    with `Authorization: Bearer $AUTOPROVISION_REPORT_TOKEN` from its start-up script. The
    order shows it; one report of a stage a second at most (`429 too_many_reports`), and none
    once the machine is being deleted (`409 attempt_ended`)."""
    if credentials is None or not credentials.credentials:
        raise Unauthorized("send the machine's token as 'Authorization: Bearer <token>'")
    recorded = await machine_reports.record(
        session, token=credentials.credentials, report=body.report(), now=utcnow()
    )
    return MachineReportAnswer(stage=recorded.stage)
