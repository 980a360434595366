"""The closed status vocabularies of runs and outbox events: one place, read by the run store,
the CLI, the console, the export definitions and the HTTP API.

A run's life (DESIGN §2, docs/kernel.md):

    STAGED --(its producer's transaction commits; published)--> QUEUED --> RUNNING --> COMPLETED
       |                                                            \\--> FAILED (retry) / DEAD
       \\--(canceled before publication / publication failed)--> CANCELED / DEAD

STAGED is written in the producer's own transaction, with its outbox event: from its commit on,
the job is known everywhere (status API, SSE, `fleet jobs show`, console); a rollback leaves no
row. Nothing runs before its producer commits.
"""

from __future__ import annotations

RUN_STATUSES = ("STAGED", "QUEUED", "RUNNING", "COMPLETED", "FAILED", "DEAD", "CANCELED")
#: States a run does not leave by itself (a DEAD run leaves only by an operator's replay).
TERMINAL_STATUSES = frozenset({"COMPLETED", "DEAD", "CANCELED"})
OUTBOX_STATUSES = ("PENDING", "PUBLISHED", "FAILED", "CANCELED")
