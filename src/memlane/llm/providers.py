"""The LLM providers: OpenAI-compatible chat completions and Anthropic messages.

Each imports its SDK only when built (``pip install 'memlane[llm]'``). Every call is logged
(model, tokens in/out, latency) on the ``memlane.llm`` logger and counted in :attr:`stats`. The
answer's form is negotiated per endpoint (:mod:`memlane.llm.formats`: ``json_schema``, else
``json_object``, else text; tool use, else a prefill, else text) and every answer is validated
against its pydantic schema. Any failure — a timeout, an HTTP error after the SDK's retries, a
server that closed the connection, an answer that is not the JSON asked for — raises
:class:`~memlane.errors.LLMError` with one line that says what it was
(:func:`memlane.llm.failures.describe`): the write path falls back, never crashes.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from memlane.config import LLMSettings
from memlane.errors import ConfigError, LLMError
from memlane.llm import ExtractedMemory, LLMStats, LLMVerdict, MergeVerdict
from memlane.llm import prompts as P
from memlane.llm.failures import describe
from memlane.llm.formats import (
    ANTHROPIC_FORMS,
    OPENAI_FORMS,
    FormChange,
    FormNegotiator,
    json_text,
    refusal,
    with_schema,
    without_lengths,
)
from memlane.llm.salvage import salvage_learn

log = logging.getLogger("memlane.llm")

_A = TypeVar("_A", bound=BaseModel)
_T = TypeVar("_T")


class Malformed(LLMError):
    """The model answered, but nothing usable (``problem``: why, in a few words, for a retry)."""

    def __init__(self, message: str, problem: str) -> None:
        super().__init__(message)
        self.problem = problem


def _api_key(settings: LLMSettings) -> str:
    name = settings.api_key_env
    key = os.environ.get(name, "") if name else ""
    if key:
        return key
    if settings.base_url:  # a local server (Ollama, vLLM, llama.cpp) needs no key
        return "unused"
    raise ConfigError(
        "llm.api_key_env",
        name,
        "name an environment variable that holds the API key (and set it), "
        "or set llm.base_url for a server that needs no key",
    )


def _sdk(provider: str) -> ModuleType:
    """The provider's SDK module (``openai`` / ``anthropic``), imported only when configured."""
    try:
        return importlib.import_module(provider)
    except ImportError:
        raise ConfigError(
            "llm.provider", provider, "install the SDK: pip install 'memlane[llm]'"
        ) from None


class ChatLLM:
    """What both providers share: prompts, form negotiation, validation, logging and counting."""

    #: The SDK's module name and its client class, filled in by each provider.
    provider = "?"
    _client_class = "?"
    #: The forms this provider can ask in, shared by every object of the class (per endpoint).
    negotiator = FormNegotiator(("text",))

    def __init__(self, settings: LLMSettings) -> None:
        self.settings = settings
        self.model = settings.model
        self.stats = LLMStats()
        #: Both SDKs' clients take the same four arguments (and retry 429/5xx themselves).
        self._client: Any = getattr(_sdk(self.provider), self._client_class)(
            api_key=_api_key(settings),
            base_url=settings.base_url,
            timeout=settings.timeout_s,
            max_retries=settings.max_retries,
        )
        #: The server's URL, as the SDK resolved it (the official endpoint without base_url).
        self.endpoint = str(self._client.base_url).rstrip("/")

    def close(self) -> None:
        """Close the SDK client's connections (the provider is not used afterwards)."""
        self._client.close()

    @property
    def form(self) -> str:
        """The form the next call asks in (``json_schema``, ``json_object``, ``text``;
        ``tool_use``, ``prefill``, ``text``)."""
        return self.negotiator.form(self.endpoint)

    def form_changes(self) -> list[FormChange]:
        """The forms this endpoint refused, oldest first (what ``memlane llm check`` shows)."""
        return self.negotiator.changes(self.endpoint)

    def _send(self, form: str, system: str, user: str, name: str, schema: dict[str, Any]) -> Any:
        """One request in ``form``: returns ``(text, tokens_in, tokens_out)``."""
        raise NotImplementedError

    def _complete(self, system: str, user: str, name: str, schema: dict[str, Any]) -> Any:
        """One call in the endpoint's form; a refusal of the form moves the endpoint to the next
        one and sends the call again. Returns ``(text, tokens_in, tokens_out)``."""
        schema = without_lengths(schema)
        while True:
            form = self.form
            try:
                return self._send(form, system, user, name, schema)
            except Exception as exc:
                message = refusal(exc, form)
                if message is None or self.negotiator.refused(self.endpoint, form, message) is None:
                    raise

    def _ask(self, system: str, user: str, answer: type[_A], purpose: str) -> _A:
        return self._call(system, user, answer, purpose, lambda text: _validate(answer, text))

    def _call(
        self,
        system: str,
        user: str,
        answer: type[BaseModel],
        purpose: str,
        parse: Callable[[str], _T],
    ) -> _T:
        """One call asking for ``answer``'s schema, its text read by ``parse`` (which raises
        :class:`ValidationError` or :class:`ValueError` for an unusable answer: then
        :class:`Malformed`). Logged and counted."""
        start = time.perf_counter()
        tokens_in = tokens_out = 0
        ok = refused = malformed = False
        try:
            text, tokens_in, tokens_out = self._complete(
                system, user, answer.__name__, P.json_schema(answer)
            )
            try:
                parsed = parse(text)
            except ValidationError as exc:
                malformed = True
                first = exc.errors()[0]
                where = ".".join(str(x) for x in first["loc"]) or "answer"
                raise Malformed(
                    f"{self.provider} model {self.model!r} gave a malformed {purpose} answer "
                    f"({first['type']} at {where}: {first['msg']}; it answered "
                    f"{_excerpt(text)})",
                    f"{where}: {first['msg']}",
                ) from None
            except ValueError as exc:
                malformed = True
                raise Malformed(
                    f"{self.provider} model {self.model!r} gave a malformed {purpose} answer "
                    f"({exc}; it answered {_excerpt(text)})",
                    str(exc),
                ) from None
            ok = True
            return parsed
        except (LLMError, ConfigError):
            raise
        except Exception as exc:  # the SDKs' timeout, status and connection errors
            refused = isinstance(getattr(exc, "status_code", None), int)
            raise LLMError(
                f"{self.provider} model {self.model!r} failed on {purpose}: "
                f"{describe(exc, self.endpoint, self.settings.timeout_s)}"
            ) from exc
        finally:
            latency = time.perf_counter() - start
            self.stats.record(
                ok=ok,
                tokens_in=tokens_in,
                tokens_out=tokens_out,
                latency_s=latency,
                kind=purpose,
                refused=refused,
                malformed=malformed,
            )
            log.info(
                "llm %s provider=%s model=%s form=%s tokens_in=%d tokens_out=%d latency_s=%.3f "
                "ok=%s",
                purpose,
                self.provider,
                self.model,
                self.form,
                tokens_in,
                tokens_out,
                latency,
                ok,
            )

    def verify_duplicate(self, existing: str, new: str) -> LLMVerdict:
        """Ask whether ``new`` duplicates ``existing``. Raises :class:`LLMError`."""
        user = P.VERIFY_USER.format(existing=existing, new=new)
        a = self._ask(P.VERIFY_SYSTEM, user, P.VerifyAnswer, "verify")
        return LLMVerdict(a.action, a.merged_text or None, a.reasoning, P.VERIFY_VERSION)

    def verify_many(self, pairs: list[tuple[str, str]]) -> list[LLMVerdict]:
        """Verify several ``(existing, new)`` pairs in one call, answers in order. Raises
        :class:`LLMError` (also when a pair is unanswered or answered twice)."""
        user = "\n\n".join(
            P.VERIFY_MANY_USER.format(n=n, existing=e, new=x) for n, (e, x) in enumerate(pairs, 1)
        )
        a = self._ask(P.VERIFY_MANY_SYSTEM, user, P.VerifyManyAnswer, "verify-many")
        by_pair = {x.pair: x for x in a.answers}
        if sorted(by_pair) != list(range(1, len(pairs) + 1)) or len(a.answers) != len(pairs):
            self.stats.mark_failed("verify-many")
            raise LLMError(
                f"{self.provider} model {self.model!r} answered pairs {sorted(by_pair)} of "
                f"{len(pairs)}"
            )
        return [
            LLMVerdict(x.action, x.merged_text or None, x.reasoning, P.VERIFY_MANY_VERSION)
            for x in (by_pair[n] for n in range(1, len(pairs) + 1))
        ]

    def merge_memories(self, texts: list[str]) -> MergeVerdict:
        """Which of ``texts`` say the same thing, merged into one. Raises :class:`LLMError`
        (also for member numbers outside the list)."""
        numbered = "\n".join(f"{i}. {t}" for i, t in enumerate(texts, 1))
        a = self._ask(
            P.JANITOR_SYSTEM, P.JANITOR_USER.format(numbered=numbered), P.JanitorAnswer, "janitor"
        )
        members = tuple(sorted({m - 1 for m in a.members}))
        if any(not 0 <= m < len(texts) for m in members):
            self.stats.mark_failed("janitor")
            raise LLMError(
                f"{self.provider} model {self.model!r} named members {a.members} of a list of "
                f"{len(texts)} memories"
            )
        return MergeVerdict(
            a.action, members, a.merged_text or None, a.reasoning, P.JANITOR_VERSION
        )

    def extract_memories(self, transcript: str) -> list[ExtractedMemory]:
        """Memories worth keeping from ``transcript``, the answer read item by item
        (:func:`memlane.llm.salvage.salvage_learn`: a bad field costs that field, a bad item that
        item). When nothing usable came back, the model is asked once more with the reason
        (:data:`~memlane.llm.prompts.LEARN_RETRY`); when that answer is unusable too, or the
        retry is not answered, nothing is learned (a WARNING on ``memlane.llm``; counted as
        malformed). Raises :class:`LLMError` only when the model never answered (timeout,
        HTTP error, connection closed)."""
        user = P.LEARN_USER.format(transcript=transcript)
        try:
            return self._call(P.LEARN_SYSTEM, user, P.LearnAnswer, "learn", salvage_learn)
        except Malformed as exc:
            problem = exc.problem
        again = f"{user}\n\n{P.LEARN_RETRY.format(problem=problem)}"
        try:
            return self._call(P.LEARN_SYSTEM, again, P.LearnAnswer, "learn", salvage_learn)
        except LLMError as exc:
            log.warning("learn: nothing usable in two answers, nothing learned (%s)", exc)
            return []


class OpenAILLM(ChatLLM):
    """Any OpenAI-compatible chat-completions server (``base_url``), on the ``openai`` SDK."""

    provider = "openai"

    _client_class = "OpenAI"

    negotiator = FormNegotiator(OPENAI_FORMS)

    def _send(self, form: str, system: str, user: str, name: str, schema: dict[str, Any]) -> Any:
        s = self.settings
        extra: dict[str, Any] = {}
        if form == "json_schema":
            extra["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": name, "schema": schema},
            }
        else:  # the schema in the prompt; json_object also sends it (llama.cpp: a grammar)
            system = with_schema(system, schema)
            if form == "json_object":
                extra["response_format"] = {"type": "json_object", "schema": schema}
        resp = self._client.chat.completions.create(
            model=s.model,
            messages=[
                {"role": "system", "content": system},
                {"role": "user", "content": user},
            ],
            temperature=s.temperature,
            max_tokens=s.max_tokens,
            **extra,
        )
        text = resp.choices[0].message.content if resp.choices else None
        usage = resp.usage
        return (
            text or "",
            usage.prompt_tokens if usage else 0,
            usage.completion_tokens if usage else 0,
        )


class AnthropicLLM(ChatLLM):
    """The Anthropic messages API (or a compatible ``base_url``), on the ``anthropic`` SDK."""

    provider = "anthropic"

    _client_class = "Anthropic"

    negotiator = FormNegotiator(ANTHROPIC_FORMS)

    def _send(self, form: str, system: str, user: str, name: str, schema: dict[str, Any]) -> Any:
        s = self.settings
        messages: list[dict[str, Any]] = [{"role": "user", "content": user}]
        extra: dict[str, Any] = {}
        if form == "tool_use":  # the answer is the forced tool call's input
            extra["tools"] = [
                {"name": name, "description": "Give the answer.", "input_schema": schema}
            ]
            extra["tool_choice"] = {"type": "tool", "name": name}
        else:
            system = with_schema(system, schema)
            if form == "prefill":  # the model continues an answer that starts with "{"
                messages.append({"role": "assistant", "content": "{"})
        resp = self._client.messages.create(
            model=s.model,
            max_tokens=s.max_tokens,
            system=system,
            messages=messages,
            # Not a typed argument of this SDK version; the messages API accepts it.
            extra_body={"temperature": s.temperature},
            **extra,
        )
        tools = [b for b in resp.content if b.type == "tool_use"]
        if tools:
            text = json.dumps(tools[0].input)
        else:
            text = "".join(getattr(b, "text", "") for b in resp.content if b.type == "text")
            if form == "prefill" and not text.lstrip().startswith("{"):
                text = "{" + text
        return text, resp.usage.input_tokens, resp.usage.output_tokens


def _validate(answer: type[_A], text: str) -> _A:
    """``text``'s first JSON object validated as ``answer``; control characters inside strings
    (a raw newline a small model wrote) are tolerated. Raises :class:`ValidationError`."""
    found = json_text(text)
    try:
        value = json.loads(found, strict=False)
    except json.JSONDecodeError:
        return answer.model_validate_json(found)  # raises, with pydantic's account of why
    return answer.model_validate(value)


def _excerpt(text: str, limit: int = 120) -> str:
    """``text`` on one line, cut to ``limit`` characters, quoted (for an error message)."""
    line = " ".join(text.split())
    return repr(line if len(line) <= limit else line[: limit - 3] + "...")
