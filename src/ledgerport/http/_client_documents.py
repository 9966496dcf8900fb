"""Client ID metadata documents at the authorization endpoint: before the request is checked, a
``client_id`` that is a URL has its document read (kept, or fetched outside any transaction so
that a slow host holds none) and its app row made or brought up to date (``auth``'s
``_client_documents`` says the rules)."""

from __future__ import annotations

from ledgerport import auth

from ._context import client_ip, platform, unit_of_work
from ._oauth_guard import oauth_guard


async def prepare_document_client(args: dict[str, list[str]]) -> None:
    """When the request's one ``client_id`` is a URL, make its client ready for the checks of
    the authorization request; ``auth.ClientDocumentRefused`` when it cannot be."""
    client_ids = args.get("client_id") or []
    if len(client_ids) != 1 or not auth.is_document_client_id(client_ids[0]):
        return
    client_id = client_ids[0]
    p = platform()
    if not p.config.cimd or p.document_fetch is None:
        raise auth.ClientDocumentRefused("client ID metadata documents are not accepted here")
    problem = auth.client_id_url_problem(client_id, development=p.config.development)
    if problem is not None:
        raise auth.ClientDocumentRefused(problem)
    async with unit_of_work() as tx:
        document = await auth.kept_document(tx, client_id, now=p.now())
    seconds = None
    if document is None:
        await oauth_guard().document_fetch(client_ip())
        document, seconds = await auth.fetch_document(p.document_fetch, client_id)
    async with unit_of_work() as tx:
        now = p.now()
        if seconds is not None:
            await auth.keep_document(tx, document, now=now, seconds=seconds)
        await auth.document_app(tx, document, now=now, scopes=p.config.cimd_scopes)
