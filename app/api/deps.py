"""Request dependencies: the unit of work and who is calling."""

from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.ext.asyncio import AsyncSession

from app.api.shares import ADMIN_SHARE, KnownKeys, account_share
from app.core.errors import Forbidden, Unauthorized
from app.services import accounts
from app.settings import Settings
from app.storage.db import session_scope
from app.storage.models import Account
from app.support.secrets import SecretBoxLoader
from app.support.security import keys_match

READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_bearer = HTTPBearer(auto_error=False)


async def get_session(request: Request) -> AsyncIterator[AsyncSession]:
    """The request's one unit of work, committed before the response is sent."""
    state = request.app.state
    maker = (
        state.read_sessionmaker if request.method in READ_METHODS else state.request_sessionmaker
    )
    async with session_scope(maker) as session:
        yield session


def get_settings_dep(request: Request) -> Settings:
    """The settings the app was created with."""
    settings: Settings = request.app.state.settings
    return settings


def secret_boxes(request: Request) -> SecretBoxLoader:
    """What seals secrets at rest (webhook secrets, start-up scripts), loaded on first use."""
    loader: SecretBoxLoader = request.app.state.secret_boxes
    return loader


SessionDep = Annotated[AsyncSession, Depends(get_session, scope="function")]
SettingsDep = Annotated[Settings, Depends(get_settings_dep)]
BearerDep = Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]


def _api_key(credentials: HTTPAuthorizationCredentials | None) -> str:
    if credentials is None or not credentials.credentials:
        raise Unauthorized("send your API key as 'Authorization: Bearer <key>'")
    return credentials.credentials


# Each key that authenticates is remembered with its account (or as the admin's), so the
# in-flight bound counts its next requests against that share without a database read.
def _known_keys(request: Request) -> KnownKeys:
    known: KnownKeys = request.app.state.known_keys
    return known


async def _account_of(request: Request, session: AsyncSession, api_key: str) -> Account | None:
    account = await accounts.find_account_by_key(session, api_key=api_key)
    if account is not None:
        _known_keys(request).learn(api_key, account_share(account.id))
    return account


async def _is_admin_key(
    request: Request, session: AsyncSession, settings: Settings, api_key: str
) -> bool:
    if settings.admin_api_key is not None:
        admin = keys_match(api_key, settings.admin_api_key.get_secret_value())
    else:
        admin = await accounts.is_stored_admin_key(session, api_key=api_key)
    if admin:
        _known_keys(request).learn(api_key, ADMIN_SHARE)
    return admin


def _not_recognised(request: Request, api_key: str) -> Unauthorized:
    _known_keys(request).forget(api_key)
    return Unauthorized("API key not recognised")


async def require_account(
    request: Request, session: SessionDep, settings: SettingsDep, credentials: BearerDep
) -> Account:
    """The account whose key authorises this request."""
    api_key = _api_key(credentials)
    account = await _account_of(request, session, api_key)
    if account is not None:
        return account
    if await _is_admin_key(request, session, settings, api_key):
        raise Forbidden("the admin key has no account; use an account's API key")
    raise _not_recognised(request, api_key)


async def require_admin(
    request: Request, session: SessionDep, settings: SettingsDep, credentials: BearerDep
) -> None:
    """Allow only the admin key."""
    api_key = _api_key(credentials)
    if await _is_admin_key(request, session, settings, api_key):
        return
    if await _account_of(request, session, api_key) is not None:
        raise Forbidden("this endpoint needs the admin API key")
    raise _not_recognised(request, api_key)


async def require_account_or_admin(
    request: Request, session: SessionDep, settings: SettingsDep, credentials: BearerDep
) -> Account | None:
    """The account whose key authorises this request, or None for the admin key."""
    api_key = _api_key(credentials)
    account = await _account_of(request, session, api_key)
    if account is not None:
        return account
    if await _is_admin_key(request, session, settings, api_key):
        return None
    raise _not_recognised(request, api_key)


CurrentAccount = Annotated[Account, Depends(require_account)]
AccountOrAdmin = Annotated[Account | None, Depends(require_account_or_admin)]
AdminOnly = Depends(require_admin)


def nudge_watcher(request: Request) -> None:
    """Tell this process's watcher (if it runs one) that the waiting orders changed.

    Run it as a background task: those run after the response, so after the commit.
    """
    background = request.app.state.background
    if background is not None and background.watcher is not None:
        background.watcher.nudge()


def nudge_terminator(request: Request) -> None:
    """Tell this process's watcher (if it runs one) to send the deletes due now (after the
    commit, as a background task)."""
    background = request.app.state.background
    if background is not None and background.watcher is not None:
        background.watcher.nudge_terminator()
