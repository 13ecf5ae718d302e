"""Demo mode: the simulated providers and the orders and stock it makes up."""

from typing import ClassVar

from pydantic import Field, model_validator

from app.settings.group import SettingsGroup

# Demo mode reads every simulated provider this often when nobody waits for it, unless
# HISTORY_POLL_SECONDS is set: the demo feed shows a machine for 4 to 12 s, so most
# appearances are recorded and the Stock page fills within a minute of `make run`.
DEMO_HISTORY_POLL_SECONDS = 5.0
# Demo mode bills in minutes, so a newcomer sees money move and machines end within minutes.
DEMO_BILLING_HOUR_SECONDS = 60.0


class DemoSettings(SettingsGroup):
    """Demo mode's simulated providers and the orders and stock it makes up."""

    title: ClassVar[str] = "Demo mode and the simulators"

    demo_feed: bool = Field(
        default=True,
        description="Demo mode places the demo orders and makes stock come and go. `false`: no "
        "demo orders, and stock only when you put it up through the simulators' control API.",
    )
    sim_port: int = Field(
        default=8001,
        ge=1,
        le=65535,
        description="Where the simulators listen (demo mode, and `autoprovision sim`).",
    )
    sim_embedded: bool = Field(
        default=True,
        description="Demo mode serves the simulators from the service's own process. `false`: "
        "run `autoprovision sim --port $AUTOPROVISION_SIM_PORT` yourself, so they outlive a "
        "killed service.",
    )
    sim_tls: bool = Field(
        default=False,
        description="Demo mode with simulators you started with `autoprovision sim --tls`: "
        "reach them over HTTPS (needs `AUTOPROVISION_SIM_EMBEDDED=false` and their certificate "
        "in `AUTOPROVISION_PROVIDER_CA_FILE`).",
    )

    @model_validator(mode="after")
    def _tls_simulators_run_apart(self) -> "DemoSettings":
        if self.sim_tls and self.sim_embedded:
            raise ValueError(
                "sim_tls needs sim_embedded=false: the embedded simulators serve plain HTTP; "
                "start them with `autoprovision sim --tls` instead"
            )
        return self

    @property
    def sim_url(self) -> str:
        """Where demo mode finds the simulators."""
        return f"{'https' if self.sim_tls else 'http'}://127.0.0.1:{self.sim_port}"
