"""The email feedback loop (issue 22): what recipients and mail systems say back about an email.

- `tokens`: signed, expiring tokens naming one email (unsubscribe links, VERP addresses).
- `unsubscribe`: the RFC 8058 one-click List-Unsubscribe headers, and the unsubscribe itself.
- `router`: the FastAPI router a product mounts (`feedback_router`), outside its own auth: the
  recipient's mailbox provider calls it with nothing but the token.
"""
