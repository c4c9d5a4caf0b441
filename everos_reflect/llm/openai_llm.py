"""The ``openai`` provider: any OpenAI-compatible chat-completions server (SPEC §9).

Structured output is requested with ``response_format`` + JSON schema; a server that rejects
schemas (a 400 naming ``response_format``/``json_schema``) is asked again in plain JSON mode, and
the client remembers that. Every reply is validated strictly — a reply that is empty, truncated,
not JSON, of the wrong shape, or that cites entry ids it was never shown is a failed call.

Retries are ours (the SDK's are off, so there is one policy): 429, 5xx, timeouts, dropped
connections and unusable replies are retried with exponential backoff and full jitter, up to
``max_retries``; any other 4xx fails at once. After that the call raises ProviderUnavailable and
the strategy skips the cluster. A semaphore shared by every thread using this client bounds the
requests in flight. A prompt estimated over ``max_prompt_tokens`` (``llm/budget.py``) is never
sent: the call fails at once as a request the server would refuse for good.
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
from collections.abc import Callable
from typing import Any

import openai
from openai import OpenAI

from everos_reflect.errors import ProviderUnavailable, clipped
from everos_reflect.http_deadline import UnusableResponse, deadline_http_client, retry_after_seconds
from everos_reflect.llm.base import (
    CALL_DEADLINE,
    FactsRequest,
    FactsResult,
    MergeRequest,
    MergeResult,
    Usage,
)
from everos_reflect.llm.budget import DEFAULT_MAX_PROMPT_TOKENS, over_budget
from everos_reflect.llm.prompts import DEFAULT_PROMPTS, Message
from everos_reflect.llm.task_catalog import facts_request, merge_request
from everos_reflect.llm.tasks import (
    InvalidReply,
    TaskRequest,
    TaskResult,
    get_task,
    parse_reply,
    render_messages,
)
from everos_reflect.model import json_got, quoted_value, redacted_url
from everos_reflect.problem_words import counted, json_type

log = logging.getLogger(__name__)

#: Most bytes of one completion's body. The longest reply any task accepts (a merge's 200,000
#: characters, every one escaped as \uXXXX) is about 1.2 MB; a lying or broken server's
#: 200 MB answer was read whole and parsed twice (~700 MB) before the validator refused it.
MAX_REPLY_BYTES = 16 << 20
#: The default ``[llm] interactive_timeout_seconds``: how long ``add`` waits for a score.
DEFAULT_INTERACTIVE_TIMEOUT_SECONDS = 5.0

# The SDK's error types that mean "try again later" rather than "this request is wrong".
_TRANSIENT = (
    openai.RateLimitError,
    openai.InternalServerError,
    openai.APITimeoutError,
    openai.APIConnectionError,
)


class OpenAILLM:
    """An :class:`~everos_reflect.llm.base.LLM` backed by an OpenAI-compatible server.

    ``sleep`` and ``rng`` are injectable so tests can record backoff delays instead of waiting.
    """

    provider = "openai"

    def __init__(
        self,
        *,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout_seconds: float = 60.0,
        max_retries: int = 3,
        max_concurrency: int = 4,
        max_prompt_tokens: int | None = DEFAULT_MAX_PROMPT_TOKENS,
        interactive_timeout_seconds: float = DEFAULT_INTERACTIVE_TIMEOUT_SECONDS,
        backoff_base: float = 0.5,
        backoff_max: float = 30.0,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
    ) -> None:
        if (max_retries < 0 or max_concurrency < 1 or timeout_seconds <= 0
                or interactive_timeout_seconds <= 0):
            raise ValueError("need max_retries >= 0, max_concurrency >= 1, timeout_seconds > 0 "
                             "and interactive_timeout_seconds > 0")
        self.model = model
        self.base_url = base_url or None
        self.timeout_seconds = timeout_seconds
        self.interactive_timeout_seconds = interactive_timeout_seconds
        self._api_key = api_key
        self._interactive: OpenAILLM | None = None
        #: the level of the log line of each failed attempt (the interactive client's caller
        #: says why in one line of its own)
        self.attempt_log_level = logging.WARNING
        self.max_retries = max_retries
        self.max_concurrency = max_concurrency
        #: estimated tokens one request may hold (None: no bound); checked before sending
        self.max_prompt_tokens = max_prompt_tokens
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._sent = 0
        self._sent_changed = threading.Condition()
        # Local servers (llama.cpp, Ollama, vLLM) need no key, but the SDK insists on one.
        self._client = OpenAI(
            base_url=self.base_url,
            api_key=api_key or "unused",
            timeout=timeout_seconds,
            max_retries=0,
            # counts each request as it is handed to the connection (see requests_sent)
            http_client=deadline_http_client(timeout_seconds, max_bytes=MAX_REPLY_BYTES,
                                             event_hooks={"request": [self._on_request]}),
        )
        self._slots = threading.BoundedSemaphore(max_concurrency)
        self._schema_supported = True
        self._state_lock = threading.Lock()

    def interactive(self) -> OpenAILLM:
        """The client for a call a person is waiting on (``add`` scoring importance): one
        attempt, bounded by ``interactive_timeout_seconds`` (connect and the whole answer),
        no retries, no backoff. ``add`` waited ``timeout_seconds`` × (``max_retries`` + 1),
        about 4 minutes by default, for a server that was down before scoring offline. Built
        once, on first use (thread-safe)."""
        with self._state_lock:
            if self._interactive is None:
                quick = OpenAILLM(
                    model=self.model, base_url=self.base_url, api_key=self._api_key,
                    timeout_seconds=min(self.interactive_timeout_seconds, self.timeout_seconds),
                    max_retries=0, max_concurrency=self.max_concurrency,
                    max_prompt_tokens=self.max_prompt_tokens,
                    interactive_timeout_seconds=self.interactive_timeout_seconds,
                    sleep=self._sleep)
                quick.attempt_log_level = logging.DEBUG
                self._interactive = quick
            return self._interactive

    # --- requests out ------------------------------------------------------------------------

    @property
    def requests_sent(self) -> int:
        """HTTP requests this client has handed to its connections so far (retries included)."""
        with self._sent_changed:
            return self._sent

    def wait_requests_sent(self, count: int, timeout: float) -> bool:
        """Block until ``requests_sent`` reaches ``count`` or ``timeout`` seconds pass; whether
        it did. A caller with heavy start-up work of its own (a Reflection run's model load
        and index import) waits for its first requests to be out before starting it: that
        work holds the interpreter lock for long stretches, and a request waiting for the lock
        is a request the server starts on later."""
        with self._sent_changed:
            return self._sent_changed.wait_for(lambda: self._sent >= count, timeout)

    def _on_request(self, request: object) -> None:
        with self._sent_changed:
            self._sent += 1
            self._sent_changed.notify_all()

    @property
    def uses_json_schema(self) -> bool:
        """False once the server has rejected JSON-schema output; plain JSON mode from then on."""
        return self._schema_supported

    # --- tasks -------------------------------------------------------------------------------

    def run_task(self, name: str, req: TaskRequest) -> TaskResult:
        """Any registered task (SPEC §9): its schema as ``response_format``, its validator on
        the reply, retries per ``max_retries``; ProviderUnavailable when nothing valid came."""
        spec = get_task(name)
        prompts = req.prompts or DEFAULT_PROMPTS
        value, usage = self._call(render_messages(spec, req, prompts), spec.schema_name,
                                  spec.schema, lambda obj: parse_reply(spec, obj, req))
        return TaskResult(value, usage, self.provider, self.model)

    def merge(self, req: MergeRequest) -> MergeResult:
        result = self.run_task("merge", merge_request(req))
        title, content = result.value
        return MergeResult(title, content, result.usage, self.provider, self.model)

    def extract_facts(self, req: FactsRequest) -> FactsResult:
        result = self.run_task("facts", facts_request(req))
        return FactsResult(result.value, result.usage)

    # --- transport, retries, validation -------------------------------------------------------

    def _call(
        self,
        messages: list[Message],
        schema_name: str,
        schema: dict[str, Any],
        parse: Callable[[dict[str, Any]], Any],
    ) -> tuple[Any, Usage]:
        """One logical call: attempts until a valid reply or the retry budget is spent.

        Usage adds up every reply received, including rejected ones: they were paid for.
        """
        too_big = over_budget(messages, self.max_prompt_tokens)
        if too_big is not None:  # refused before a byte is sent, as a 413 would refuse it
            err = _unavailable(self._failure(too_big), Usage())
            err.permanent = True
            raise err
        usage = Usage()
        last_problem = "no attempt made"
        retry_after: float | None = None
        deadline = CALL_DEADLINE.get()
        attempts = 0
        for attempt in range(self.max_retries + 1):
            if attempt:
                delay = self._backoff(attempt, retry_after)
                if deadline is not None and (time.monotonic() + delay + self.timeout_seconds
                                             > deadline):
                    last_problem += ("; no retry: the run's max_wall_seconds ends before "
                                     "another try could")
                    break
                self._sleep(delay)
            attempts += 1
            try:
                completion = self._create(messages, schema_name, schema)
            except _TRANSIENT as exc:
                last_problem = _describe(exc)
                retry_after = _retry_after_seconds(exc)
                log.log(self.attempt_log_level, "LLM call failed (attempt %d): %s",
                        attempt + 1, last_problem)
                continue
            except openai.APIStatusError as exc:
                err = _unavailable(self._failure(_describe(exc)), usage)
                err.permanent = exc.status_code in REFUSED_REQUEST
                raise err from exc
            except openai.OpenAIError as exc:  # misconfiguration and the like
                raise _unavailable(self._failure(clipped(str(exc))), usage) from exc
            except UnicodeEncodeError as exc:  # a header (the api_key) HTTP cannot carry
                raise _unavailable(self._failure(
                    f"the request cannot be sent: {exc.reason} in a header (check the "
                    "api_key)"), usage) from exc
            except _UNPARSABLE as exc:  # a 200 whose body is not JSON the parser can read
                last_problem = f"unusable reply: the response body is not JSON ({_why(exc)})"
                log.log(self.attempt_log_level, "LLM reply rejected (attempt %d): %s",
                        attempt + 1, last_problem)
                continue
            retry_after = None
            usage = usage + _usage(completion)
            try:
                return parse(_reply_object(completion)), usage
            except InvalidReply as exc:
                last_problem = f"unusable reply: {clipped(str(exc))}"
                log.log(self.attempt_log_level, "LLM reply rejected (attempt %d): %s",
                        attempt + 1, last_problem)
        raise _unavailable(
            self._failure(f"{last_problem} (gave up after {counted(attempts, 'attempt')})"),
            usage)

    def _create(self, messages: list[Message], schema_name: str, schema: dict[str, Any]) -> Any:
        """Send one request; on a schema refusal switch to JSON mode and resend at once."""
        with self._slots:
            if self._schema_supported:
                try:
                    return self._send(messages, _schema_format(schema_name, schema))
                except openai.BadRequestError as exc:
                    if not _rejects_schema(exc):
                        raise
                    with self._state_lock:
                        self._schema_supported = False
                    log.info("server rejected json_schema output; using json_object mode")
            return self._send(messages, {"type": "json_object"})

    def _send(self, messages: list[Message], response_format: dict[str, Any]) -> Any:
        return self._client.chat.completions.create(
            model=self.model,
            messages=messages,  # type: ignore[arg-type]
            response_format=response_format,  # type: ignore[arg-type]
        )

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        """Full jitter on an exponential ceiling; a server's Retry-After raises the floor."""
        ceiling = min(self.backoff_max, self.backoff_base * 2 ** (attempt - 1))
        delay = self._rng.uniform(0, ceiling)
        if retry_after is not None:
            delay = max(delay, min(retry_after, self.backoff_max))
        return delay

    def _failure(self, reason: str) -> str:
        where = redacted_url(self.base_url) if self.base_url else "api.openai.com"
        return f"LLM {self.model!r} at {where}: {reason}"


#: What ``json.loads`` raises on text it cannot read. Besides JSONDecodeError (a ValueError):
#: RecursionError for nesting past the interpreter's recursion limit, and ValueError for an
#: integer of more than ``sys.get_int_max_str_digits()`` digits. Both escaped the call as they
#: were, and one lying reply failed the whole run instead of the call (SPEC §5, §9).
_UNPARSABLE = (ValueError, RecursionError)


def _why(exc: Exception) -> str:
    """What the JSON parser said, short: its message and place, or the kind of refusal."""
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg} at char {exc.pos}"
    if isinstance(exc, RecursionError):
        return "nested too deeply to read"
    return str(exc).split(";")[0][:200]


def _unavailable(message: str, usage: Usage) -> ProviderUnavailable:
    """The failure of a call, carrying the tokens of the replies it refused (paid for)."""
    err = ProviderUnavailable(message)
    err.usage = usage if usage.total_tokens else None
    return err


def _schema_format(name: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": {"name": name, "strict": True, "schema": schema}}


def _rejects_schema(exc: openai.BadRequestError) -> bool:
    text = f"{exc.message} {exc.body}".lower()
    return "response_format" in text or "json_schema" in text


def _describe(exc: openai.OpenAIError) -> str:
    if isinstance(exc, openai.APITimeoutError):
        return "request timed out"
    if isinstance(exc, openai.APIConnectionError):
        if isinstance(exc.__cause__, UnusableResponse):
            return f"unusable reply: {exc.__cause__}"
        return "connection failed"
    if isinstance(exc, openai.APIStatusError):
        return f"HTTP {exc.status_code}: {clipped(exc.message)}"
    return clipped(str(exc))


#: Statuses that refuse the request itself (malformed, too long, content rejected): the same
#: input is refused again, unlike an outage (5xx), a bad key (401, 403), a wrong model or URL
#: (404) or a rate limit (429), which say nothing about it.
REFUSED_REQUEST = frozenset({400, 413, 422})

def _retry_after_seconds(exc: Exception) -> float | None:
    response = getattr(exc, "response", None)
    return None if response is None else retry_after_seconds(response.headers)


#: The most tokens one reply may count, prompt or completion (a thousand times the largest
#: context windows). A server's count past it is taken as this many: 10^20 went into the
#: audit row as it was, SQLite refused the integer, and the merge, its Markdown already
#: written, stayed half-done with every later run failing to recover it.
MAX_REPLY_TOKENS = 10**9


def _tokens(value: object) -> int:
    """A token count as the server reported it, at most :data:`MAX_REPLY_TOKENS`; anything
    but a count of 0 or more is 0."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return min(value, MAX_REPLY_TOKENS)
    return 0


def _usage(completion: Any) -> Usage:
    # The SDK does not validate a response's types, so a broken server's fields arrive as sent.
    usage = getattr(completion, "usage", None)
    return Usage(_tokens(getattr(usage, "prompt_tokens", 0)),
                 _tokens(getattr(usage, "completion_tokens", 0)))


def _why_empty(choice: Any, message: Any) -> str:
    """Why a reply holds no text, as far as the server said: a tool call or a content filter
    in place of the JSON asked for read "empty reply", which sent a person looking at the
    model's output instead of the server's tool or moderation settings."""
    calls = getattr(message, "tool_calls", None) or []
    legacy = getattr(message, "function_call", None)
    names = [getattr(getattr(c, "function", None), "name", None) for c in calls]
    if legacy is not None:
        names.append(getattr(legacy, "name", None))
    if names:
        named = ", ".join(quoted_value(n) for n in names[:3] if isinstance(n, str))
        more = f" and {len(names) - 3} more" if len(names) > 3 else ""
        return (f"the model called a tool ({named or 'unnamed'}{more}) instead of answering "
                "with the JSON asked for: check the server's tool settings (none are sent)")
    if getattr(choice, "finish_reason", None) == "content_filter":
        return "empty reply: withheld by the server's content filter (finish_reason=content_filter)"
    return "empty reply"


def _error_said(completion: Any) -> str:
    """``": the server answered 200 with an error: '...'"`` when a completion with no choices
    carries an OpenAI-style ``error`` (``{"message": ...}`` or text), else ``""``. A proxy or
    an overloaded server answering 200 with its error read "no choices in the reply" alone,
    and the run record hid what the server had said."""
    error = getattr(completion, "error", None)
    if isinstance(error, dict):
        error = error.get("message") or error.get("type") or error.get("code")
    if error is None or isinstance(error, (dict, list)) or str(error).strip() == "":
        return ""
    # quoted whole: quoted_value cuts it and says its length (of a text cut first, it said
    # "(324 characters)" of a 1 MB one)
    return f": the server answered 200 with an error: {quoted_value(str(error))}"


def _not_a_completion(body: object) -> str:
    """Why a 200 whose body is no JSON object is no chat completion, quoting what it holds.
    The SDK hands on a body that is not JSON (a proxy's login page, ``text/html``) as its
    text, and a JSON string, array or number as that value: each read "no choices in the
    reply", which sent a person looking at the model, not at ``base_url``."""
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    said = (f"the text {quoted_value(body.strip())}" if isinstance(body, str)
            else json_got(body))
    return (f"not a chat completion: the server answered 200 with {said}; is base_url an "
            "OpenAI-compatible endpoint (and not a proxy's page)?")


def _refusal_words(refusal: object) -> str:
    """A model's refusal as any value a server sent is quoted (escaped, cut with its length):
    it was put in the failure raw, an ESC of it reaching the terminal through each attempt's
    warning, and one that was no text as Python writes it ("{'why': 'policy'}", "True")."""
    if isinstance(refusal, str):
        return quoted_value(refusal)
    return f"(its refusal is {json_got(refusal)})"


def _reply_object(completion: Any) -> dict[str, Any]:
    """The reply's JSON object, or InvalidReply saying precisely what is wrong with it.

    The SDK builds the completion without checking types, so every field is checked here: a
    server answering 200 with the wrong shape is an unusable reply, never an AttributeError
    that would end the whole run instead of the one call.
    """
    if completion is None or isinstance(completion, str | bytes | list | int | float | bool):
        raise InvalidReply(_not_a_completion(completion))
    choices = getattr(completion, "choices", None)
    if not isinstance(choices, list) or not choices:
        raise InvalidReply("no choices in the reply" + _error_said(completion))
    choice = choices[0]
    if getattr(choice, "finish_reason", None) == "length":
        raise InvalidReply("reply truncated (finish_reason=length)")
    message = getattr(choice, "message", None)
    if message is None:
        raise InvalidReply("no message in the reply's first choice")
    refusal = getattr(message, "refusal", None)
    if refusal:
        raise InvalidReply(f"model refused: {_refusal_words(refusal)}")
    content = getattr(message, "content", None)
    if content is not None and not isinstance(content, str):
        raise InvalidReply(f"message content is {json_type(content)}, not text")
    text = (content or "").strip()
    if not text:
        raise InvalidReply(_why_empty(choice, message))
    try:
        obj = json.loads(text)
    except _UNPARSABLE as exc:
        # what it begins with: a model refusing in prose ("I'm sorry, ...") read as a parse
        # error alone, "Expecting value at char 0"
        begins = f": it begins {quoted_value(text)}" if not text.startswith(("{", "[")) else ""
        raise InvalidReply(f"not valid JSON ({_why(exc)}){begins}") from None
    if not isinstance(obj, dict):
        raise InvalidReply(f"expected a JSON object, got {json_type(obj)}")
    return obj
