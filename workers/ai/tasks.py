"""The four AI tasks: parameters, prompts, and what makes an output acceptable.

- summarize: a plain completion → `{"summary": text}`.
- extract: JSON that must validate against the JSON Schema in `params.schema`. An invalid
  output gets one repair round-trip (the model sees its output and the validation errors);
  still invalid → `PermanentError(EXTRACT_INVALID)` listing the errors (schema paths and
  keywords only: the output itself never goes into an error, which reaches logs and the DLQ).
- classify: one of `params.labels` (or several with `multi`), i.e. extract against an enum schema.
- embed: vectors of the input text(s) → `{"vectors": [...], "dims": n}`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from shared.errors import PermanentError

from .provider import Completion, Message

#: Most validation errors quoted in a failure or a repair prompt.
MAX_ERRORS = 10
#: Most texts in one embed task (the OpenAI embeddings API's limit).
MAX_EMBED_INPUTS = 2_048


class _Params(BaseModel):
    # Unknown keys are the producer's own (doc sends `document_id`): kept on the row, ignored here.
    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)


class ChatParams(_Params):
    model: str | None = None
    max_tokens: int | None = Field(default=None, ge=1)
    instructions: str | None = Field(
        default=None, description="Extra guidance appended to the prompt"
    )


class SummarizeParams(ChatParams):
    max_words: int = Field(default=150, ge=5, le=2_000)
    language: str | None = Field(
        default=None, description="Language of the summary (default: the text's)"
    )


class ExtractParams(ChatParams):
    json_schema: dict[str, Any] = Field(alias="schema")


class ClassifyParams(ChatParams):
    labels: list[str] = Field(min_length=2)
    multi: bool = False


class EmbedParams(_Params):
    provider: Literal["local", "openai"] | None = None
    model: str | None = None


PARAMS: dict[str, type[_Params]] = {
    "summarize": SummarizeParams,
    "extract": ExtractParams,
    "classify": ClassifyParams,
    "embed": EmbedParams,
}


def parse_params(task: str, params: dict[str, Any], text: Any) -> _Params:
    """Validate a task's params and input; anything wrong is permanent (`INVALID_PARAMS`)."""
    try:
        parsed = PARAMS[task].model_validate(params)
    except ValidationError as exc:
        details = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'params'}: {e['msg']}" for e in exc.errors()
        )
        raise PermanentError(f"{task}: invalid params: {details}", code="INVALID_PARAMS") from None
    if task == "embed":
        texts = text if isinstance(text, list) else [text]
        if not texts or len(texts) > MAX_EMBED_INPUTS or not all(isinstance(t, str) for t in texts):
            raise PermanentError(
                f"embed: input must be 1 to {MAX_EMBED_INPUTS} texts", code="INVALID_PARAMS"
            )
    elif not isinstance(text, str) or not text.strip():
        raise PermanentError(f"{task}: input must be a non-empty text", code="INVALID_PARAMS")
    if isinstance(parsed, ExtractParams):
        _check_schema(parsed.json_schema)
    if isinstance(parsed, ClassifyParams) and len(set(parsed.labels)) != len(parsed.labels):
        raise PermanentError("classify: labels must be unique", code="INVALID_PARAMS")
    return parsed


# -- prompts ---------------------------------------------------------------------------------

Chat = Callable[[list[Message], bool], Completion]


def summarize(text: str, p: SummarizeParams, chat: Chat) -> dict[str, Any]:
    language = (
        f" Write it in {p.language}." if p.language else " Write it in the language of the text."
    )
    system = (
        f"You summarize documents for busy readers. Answer with the summary only, at most "
        f"{p.max_words} words, no preamble.{language}" + _extra(p)
    )
    completion = chat([Message("system", system), Message("user", text)], False)
    return {"summary": completion.text.strip(), "finish_reason": completion.finish_reason}


def extract(text: str, p: ExtractParams, chat: Chat) -> dict[str, Any]:
    return {
        "data": _structured(
            text, p.json_schema, "Extract the requested data from the text.", p, chat
        )
    }


def classify(text: str, p: ClassifyParams, chat: Chat) -> dict[str, Any]:
    if p.multi:
        schema: dict[str, Any] = {
            "type": "object",
            "properties": {
                "labels": {"type": "array", "items": {"enum": p.labels}, "uniqueItems": True}
            },
            "required": ["labels"],
            "additionalProperties": False,
        }
        goal = "Give every label that applies to the text."
    else:
        schema = {
            "type": "object",
            "properties": {"label": {"enum": p.labels}},
            "required": ["label"],
            "additionalProperties": False,
        }
        goal = "Give the one label that best fits the text."
    goal = f"Classify the text. Labels: {json.dumps(p.labels)}. {goal}"
    answer: dict[str, Any] = _structured(text, schema, goal, p, chat)
    return answer


def _structured(text: str, schema: dict[str, Any], goal: str, p: ChatParams, chat: Chat) -> Any:
    system = (
        f"{goal} Answer with a single JSON value that validates against this JSON Schema, "
        f"and nothing else:\n{json.dumps(schema)}" + _extra(p)
    )
    messages = [Message("system", system), Message("user", text)]
    completion = chat(messages, True)
    value, errors = check_output(completion.text, schema)
    if not errors:
        return value
    # One repair round-trip: the model sees what it answered and why it is not acceptable.
    repair = [
        *messages,
        Message("assistant", completion.text),
        Message(
            "user",
            "Your answer is not valid:\n- "
            + "\n- ".join(e.for_model for e in errors)
            + "\nAnswer again with the corrected JSON only.",
        ),
    ]
    value, errors = check_output(chat(repair, True).text, schema)
    if not errors:
        return value
    raise PermanentError(
        "output still invalid after one repair: " + "; ".join(e.for_log for e in errors),
        code="EXTRACT_INVALID",
    )


def _extra(p: ChatParams) -> str:
    return f"\n{p.instructions}" if p.instructions else ""


# -- validation ------------------------------------------------------------------------------


class OutputError:
    def __init__(self, for_model: str, for_log: str) -> None:
        self.for_model = for_model  # may quote the output: goes back to the model only
        self.for_log = for_log  # schema path and keyword only


_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL)


def check_output(text: str, schema: dict[str, Any]) -> tuple[Any, list[OutputError]]:
    """Parse `text` as JSON (a Markdown fence around it is tolerated) and validate it."""
    from jsonschema import validators

    match = _FENCE.match(text)
    try:
        value = json.loads(match.group(1) if match else text)
    except ValueError as exc:
        position = f"line {getattr(exc, 'lineno', '?')} column {getattr(exc, 'colno', '?')}"
        return None, [OutputError(f"not JSON: {exc}", f"output is not JSON ({position})")]
    validator = validators.validator_for(schema)(schema)
    found = sorted(validator.iter_errors(value), key=lambda e: list(map(str, e.absolute_path)))
    errors = []
    for e in found[:MAX_ERRORS]:
        where = "$" + "".join(f"[{p!r}]" for p in e.absolute_path)
        if e.validator == "required":
            detail = e.message  # "'x' is a required property": a name from the schema
        else:
            detail = f"fails {e.validator!r}: {json.dumps(e.validator_value, default=str)[:120]}"
        errors.append(OutputError(f"{where}: {e.message}", f"{where} {detail}"))
    return value, errors


def _check_schema(schema: dict[str, Any]) -> None:
    from jsonschema import SchemaError, validators

    try:
        validators.validator_for(schema).check_schema(schema)
    except SchemaError as exc:
        raise PermanentError(
            f"extract: params.schema is not a valid JSON Schema: {exc.message}",
            code="INVALID_PARAMS",
        ) from None
