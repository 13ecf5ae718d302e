"""Parameters shared by the routes: ids from the path, provider names orders may use."""

from typing import Annotated, Any

from fastapi import Path
from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, PydanticCustomError, core_schema

from app.core.catalogue import Provider
from app.core.text import OneLine
from app.providers.registry import offered_providers

# The longest id the service makes or stores (`String(40)` columns): a longer one names nothing.
MAX_ID_LENGTH = 40
# A model's Hugging Face id, as an order keeps it (`orders.model`).
MAX_MODEL_ID_LENGTH = 200
# An id from the URL goes into SQL as it is, and a request with an Idempotency-Key keeps its
# path: one PostgreSQL cannot take (NUL, or longer than its columns) is a 422 here.
PathId = Annotated[
    str,
    Path(description="The id, as returned when it was created.", max_length=MAX_ID_LENGTH),
    OneLine,
]


class _Offered:
    """Pydantic metadata: the name must be one orders may use now; the schema lists them."""

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> CoreSchema:
        return core_schema.no_info_after_validator_function(_offered, handler(source))

    def __get_pydantic_json_schema__(
        self, _schema: CoreSchema, _handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return {"type": "string", "enum": [str(p) for p in offered_providers()]}


def _offered(value: Provider) -> Provider:
    known = offered_providers()
    if value not in known:
        names = [repr(str(p)) for p in known]
        expected = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]
        raise PydanticCustomError("enum", "Input should be {expected}", {"expected": expected})
    return value


# A provider name from a request: 422 unless orders may name it (the registry offers it).
OfferedProvider = Annotated[Provider, _Offered()]
