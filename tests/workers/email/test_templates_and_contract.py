"""Templates, the payload contract and the CLI: pure, no worker, no SMTP server."""

from __future__ import annotations

import uuid
from email import policy
from email.parser import BytesParser

import pytest
from typer.testing import CliRunner

from shared.errors import PayloadError
from workers.email.cli import app
from workers.email.contracts import EMAIL_SEND
from workers.email.message import message_id_for
from workers.email.sink import read_inbox, read_message, store_message
from workers.email.templates import HeaderInjection, MissingVariable, Templates, UnknownTemplate

VARIABLES = {
    "otp-code": {"CODE": "482915", "EXPIRES_MINUTES": "10"},
    "welcome": {"NAME": "Ada"},
    "quote-reminder": {
        "NAME": "Ada",
        "QUOTE_REF": "Q-7",
        "QUOTE_URL": "https://example.com/q",
        "EXPIRES_ON": "1 Dec",
    },
    "support-reply": {"NAME": "Ada", "TICKET_REF": "T-42", "MESSAGE": "We fixed it."},
}


def test_the_four_templates_exist_in_french_and_english() -> None:
    assert Templates().keys() == sorted(VARIABLES)


@pytest.mark.parametrize("lang", ["fr", "en"])
@pytest.mark.parametrize("key", sorted(VARIABLES))
def test_every_template_renders_subject_text_and_html_with_its_variables(
    key: str, lang: str
) -> None:
    rendered = Templates(product_name="BlockLucky").render(key, lang, VARIABLES[key])
    assert rendered.subject and "\n" not in rendered.subject
    for value in VARIABLES[key].values():
        assert value in rendered.text and value in rendered.html
    assert f'<html lang="{lang}">' in rendered.html and "BlockLucky" in rendered.html


def test_html_is_escaped_and_text_is_not() -> None:
    rendered = Templates().render("welcome", "en", {"NAME": "<script>x</script>"})
    assert "&lt;script&gt;" in rendered.html and "<script>" not in rendered.html
    assert "<script>x</script>" in rendered.text


def test_a_missing_variable_is_a_permanent_error_naming_it() -> None:
    with pytest.raises(MissingVariable, match="'QUOTE_URL' is undefined") as err:
        Templates().render(
            "quote-reminder", "fr", {"NAME": "a", "QUOTE_REF": "b", "EXPIRES_ON": "c"}
        )
    assert err.value.code == "TEMPLATE_UNDEFINED"


@pytest.mark.parametrize(
    ("key", "lang"),
    [("nope", "en"), ("otp-code", "de"), ("../en/welcome", "en"), ("_layout", "en")],
)
def test_unknown_templates_and_languages_are_refused(key: str, lang: str) -> None:
    with pytest.raises(UnknownTemplate):
        Templates().render(key, lang, {})


def test_crlf_from_a_variable_into_the_subject_is_refused() -> None:
    with pytest.raises(HeaderInjection):
        Templates().render("welcome", "en", {"NAME": "Ada\nBcc: victim@example.com"})


def _payload(**fields: object) -> dict[str, object]:
    base = {"org_id": str(uuid.uuid4()), "entity_id": str(uuid.uuid4()), "template_key": "welcome",
            "recipient_email": "ada@example.com"}  # fmt: skip
    return {**base, **fields}


@pytest.mark.parametrize(
    "fields",
    [
        {"recipient_email": "ada@example.com\r\nBcc: victim@example.com"},
        {"recipient_email": "ada@example.com\nX: y"},
        {"recipient_email": "not-an-address"},
        {"reply_to": "support@example.com\r\nBcc: victim@example.com"},
        {"recipient_name": "Ada\r\nBcc: victim@example.com"},
        {"recipient_name": "Ada\nLovelace"},
        {"template_key": "welcome\n"},
        {"lang": "de"},
    ],
)
def test_the_contract_refuses_crlf_and_bad_addresses_before_anything_is_queued(
    fields: dict[str, object],
) -> None:
    with pytest.raises(PayloadError) as err:
        EMAIL_SEND.build(_payload(**fields))
    assert {str(e["loc"][0]) for e in err.value.errors} <= set(fields)


def test_the_message_id_is_stable_per_job_and_distinct_between_jobs() -> None:
    first = message_id_for("org:email:send:a:1", "example.com")
    assert first == message_id_for("org:email:send:a:1", "example.com")
    assert first != message_id_for("org:email:send:b:1", "example.com")
    assert (
        first.startswith("<")
        and first.endswith("@example.com>")
        and len(first) == 32 + len("<@example.com>")
    )


def test_cli_preview_writes_the_eml_and_the_html(tmp_path) -> None:
    result = CliRunner().invoke(
        app, ["preview", "otp-code", "--lang", "fr", "--var", "CODE=123456", "--var", "EXPIRES_MINUTES=5",
              "--out", str(tmp_path)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    msg = read_message(tmp_path / "otp-code.fr.eml")
    assert msg["Subject"].startswith("Votre code de connexion")
    assert "123456" in msg.get_body(("plain",)).get_content()
    assert "123456" in (tmp_path / "otp-code.fr.html").read_text()


def test_cli_preview_names_a_missing_variable(tmp_path) -> None:
    result = CliRunner().invoke(
        app, ["preview", "otp-code", "--var", "CODE=1", "--out", str(tmp_path)]
    )
    assert result.exit_code == 1 and "EXPIRES_MINUTES" in result.output


def test_cli_inbox_lists_what_the_sink_stored(tmp_path) -> None:
    content = b"Message-ID: <abc@x>\r\nSubject: Hello inbox\r\nTo: a@example.com\r\n\r\nbody\r\n"
    store_message(tmp_path, "from@example.com", ["a@example.com"], content)
    [item] = read_inbox(tmp_path)
    assert item.message_id == "<abc@x>" and item.envelope_to == "a@example.com"

    result = CliRunner().invoke(app, ["inbox", "--maildir", str(tmp_path)])
    assert (
        result.exit_code == 0 and "Hello inbox" in result.output and "1 message(s)" in result.output
    )


@pytest.mark.parametrize("body", ["a" * 2_000, "é" + "a" * 2_000])
def test_no_line_of_a_message_exceeds_998_characters(body: str) -> None:
    from datetime import UTC, datetime

    from workers.email.message import build_message, serialize
    from workers.email.templates import Rendered

    message, envelope = build_message(
        Rendered(subject="Long", text=body, html=f"<p>{body}</p>"),
        message_id="<long@test.jobfleet>",
        from_header="jobfleet <no-reply@test.jobfleet>",
        to="ada@example.com",
        date=datetime.now(UTC),
        lang="en",
    )
    content = serialize(message, envelope)

    assert max(len(line) for line in content.split(b"\r\n")) <= 998
    parsed = BytesParser(policy=policy.default).parsebytes(content)
    assert parsed.get_body(("plain",)).get_content().rstrip("\n") == body


@pytest.mark.parametrize(
    ("subject", "name", "text"),
    [
        ("Hello", None, "plain ascii\nsecond line\n"),
        ("Réinitialisation de votre mot de passe — un sujet bien plus long que soixante-dix-huit caractères",
         'Zoé "the boss", Martin', "Bonjour Zoé,\n€ — œ ’\n"),
        ("A" * 120, "Ada Lovelace-Byron of a very long family name indeed, " * 3, "x" * 1_500),
    ],
)  # fmt: skip
def test_the_fast_serializer_writes_what_the_email_package_would(
    subject: str, name: str | None, text: str
) -> None:
    from datetime import UTC, datetime

    from workers.email.message import _COMPAT32_SMTP, build_message, serialize
    from workers.email.templates import Rendered

    message, envelope = build_message(
        Rendered(subject=subject, text=text, html=f"<p>{text}</p>"),
        message_id="<fast@test.jobfleet>",
        from_header="Zoé de jobfleet <no-reply@test.jobfleet>",
        to="anna@müller.example.com",
        to_name=name,
        cc=["c1@example.com", "c2@example.com"],
        reply_to="agent@support.example.com",
        date=datetime(2026, 11, 30, tzinfo=UTC),
        lang="fr",
    )
    fast = serialize(message, envelope)
    reference = message.as_bytes(policy=_COMPAT32_SMTP)

    assert fast == reference
    assert max(len(line) for line in fast.split(b"\r\n")) <= 998 and b"\n" not in fast.replace(
        b"\r\n", b""
    )
