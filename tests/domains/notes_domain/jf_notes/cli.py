"""`fleet notes ...`"""

from __future__ import annotations

import typer

from .settings import notes_settings

app = typer.Typer(help="Notes: a sixth domain.", no_args_is_help=True)


@app.command("limits")
def limits() -> None:
    """Print the indexing limit."""
    print(f"max words: {notes_settings().max_words}")


@app.command("index")
def index(text: str) -> None:
    """Send `notes:index` for TEXT and print its job id."""
    from .client import index_note

    print(index_note(text).job_id)
