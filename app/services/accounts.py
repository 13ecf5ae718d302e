"""Accounts and the API keys that stand for them, plus the admin key."""

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.clock import utcnow
from app.core.errors import NotFound
from app.core.ids import new_id
from app.core.text import quote
from app.storage.models import Account, AdminKey
from app.support.security import ADMIN_KEY_PREFIX, generate_api_key, hash_api_key

ADMIN_KEY_ROW = 1


async def create_account(session: AsyncSession, *, name: str) -> tuple[Account, str]:
    """A new account with no money, and its API key (returned here only; we keep the hash)."""
    api_key = generate_api_key()
    account = Account(id=new_id("acct"), name=name, api_key_hash=hash_api_key(api_key))
    session.add(account)
    await session.flush()
    return account, api_key


async def get_account(session: AsyncSession, *, account_id: str) -> Account:
    """The account with this id, or NotFound."""
    account = await session.get(Account, account_id, populate_existing=True)
    if account is None:
        raise NotFound(f"no account {quote(account_id)}")
    return account


async def list_accounts(session: AsyncSession, *, cursor: str | None, limit: int) -> list[Account]:
    """Every account, newest first, starting after `cursor` (an account id): the admin's."""
    statement = select(Account)
    if cursor is not None:
        statement = statement.where(Account.id < cursor)
    statement = statement.order_by(Account.id.desc()).limit(limit)
    return list((await session.execute(statement)).scalars())


async def find_account_by_key(session: AsyncSession, *, api_key: str) -> Account | None:
    """The account whose API key this is, if any."""
    result = await session.execute(
        select(Account).where(Account.api_key_hash == hash_api_key(api_key))
    )
    return result.scalar_one_or_none()


async def is_stored_admin_key(session: AsyncSession, *, api_key: str) -> bool:
    """Whether this is the admin key generated at first start."""
    result = await session.execute(
        select(AdminKey.id).where(AdminKey.key_hash == hash_api_key(api_key))
    )
    return result.first() is not None


async def ensure_admin_key(session: AsyncSession) -> str | None:
    """Generate and store the admin key if none exists yet; returns it only when new."""
    if await session.get(AdminKey, ADMIN_KEY_ROW) is not None:
        return None
    api_key = generate_api_key(ADMIN_KEY_PREFIX)
    try:
        async with session.begin_nested():
            session.add(AdminKey(id=ADMIN_KEY_ROW, key_hash=hash_api_key(api_key)))
    except IntegrityError:
        return None  # another replica generated it first
    return api_key


async def reset_admin_key(session: AsyncSession) -> str:
    """Replace the stored admin key with a new one, and return it."""
    api_key = generate_api_key(ADMIN_KEY_PREFIX)
    await session.merge(
        AdminKey(id=ADMIN_KEY_ROW, key_hash=hash_api_key(api_key), created_at=utcnow())
    )
    await session.flush()
    return api_key
