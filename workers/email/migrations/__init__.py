"""The email domain's Alembic revisions (registered as `Domain.migrations`): scheduled emails,
sequences and suppressions (0002), deferral tracking (0010), and the feedback loop: bounces,
kept inbound messages, opens and clicks, the org's tracking switch, SES events (0014). They
branch off the kernel's first revision (`0001`).
"""
