"""The email feedback loop (issue 22): what recipients and mail systems say back about an email.

- `tokens`: signed tokens naming one email (unsubscribe and tracking links, VERP addresses).
- `unsubscribe`: the RFC 8058 one-click List-Unsubscribe headers, and the unsubscribe itself.
- `bounces`: VERP envelope senders and RFC 3464 DSNs (BOUNCED, suppression).
- `inbound`: the SMTP listener taking DSNs and mailto unsubscribes (`email-inbound`).
- `tracking`: opt-in open pixel and signed click redirects.
- `sns`: Amazon SES events through SNS (signature verification, replay refusal).
- `router`: the FastAPI router a product mounts (`feedback_router`), outside its own auth: the
  caller (a mailbox provider, a browser, SNS) has nothing but the signed token or signature.
"""
