"""What every group of settings is: a part of `Settings`, with a title for the reference."""

from typing import ClassVar

from pydantic import BaseModel


class SettingsGroup(BaseModel):
    """Fields that `Settings` takes on by inheriting the group, so each keeps its flat
    `AUTOPROVISION_<NAME>` variable and is read as `settings.<name>`; the reference and
    `.env.example` list the groups in turn, under `title`."""

    title: ClassVar[str]
    # The watcher's inner periods: the defaults suit any deployment, and the reference lists
    # them last, apart from what an operator sets.
    advanced: ClassVar[bool] = False
