"""The model an endpoint serves behind a registry entry's name, observed, so that a change re-audits the model.

Providers change a model behind the same name. A registry entry opts in with `observe:`

    models:
      my-model:
        backend: openai
        model: gpt-4o-mini
        observe: daily            # or {every_hours: 48}; at most once a day; {probe: models}: the listing

and the `sctc_served_models` sensor (assets/served_models.py) then asks the endpoint, at most once per interval, one
one-token chat completion (`max_tokens: 1`, a fixed prompt; the cheapest call an OpenAI-compatible API answers with
the served `model` and its `system_fingerprint`; the same fields the responses tables keep per answer), or with
`probe: models` the provider's model listing, `GET /models/{model}` (free, no tokens: the model's `id`, `created`
and `owned_by`, without a fingerprint, so it sees a change only when the provider's listing changes; a model the
listing does not know is an observation error, never a change). The pair is
the observed version (`served_version`): its short hash is the data version of the `served_model` source asset's
partition of that model, and its epoch tag (`epoch_of`) tags the model's next answers (they enter the cache key, as
`--sovereignty-epoch` does), so the drift table compares the answers of two served versions. Only backends with the
`observable` trait can be observed (never a replay nor the embedded model: `lib/backend_catalog.py`).
"""

from __future__ import annotations

import hashlib
import json
import os
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any, Mapping

DAILY_HOURS = 24.0
# The probe's prompt: fixed, so that every observation costs the same one or two tokens.
PROBE_PROMPT = "Reply with one word: ok"
EPOCH_PREFIX = "served-"


class ObserveError(ValueError):
    pass


# How an endpoint is observed: a one-token chat completion, or the provider's model listing (`GET /models/{model}`).
CHAT_PROBE, MODELS_PROBE = "chat", "models"
PROBES = (CHAT_PROBE, MODELS_PROBE)


def parse_observe(raw: Any, *, where: str) -> float | None:
    """A registry entry's `observe` as hours between observations: absent or false gives None (not observed);
    `daily` or true 24; `{every_hours: N, probe: …}` N, at least 24 (default 24: an observation may be a paid
    call)."""
    expected = "expected `observe: daily` or `observe: {every_hours: N, probe: chat|models}` with N >= 24"
    if raw is None or raw is False:
        return None
    if raw is True or raw == "daily":
        return DAILY_HOURS
    if isinstance(raw, Mapping):
        unknown = sorted(str(name) for name in raw if name not in ("every_hours", "probe"))
        hours = raw.get("every_hours", DAILY_HOURS)
        if not unknown and isinstance(hours, (int, float)) and not isinstance(hours, bool) and hours >= DAILY_HOURS:
            return float(hours)
        if unknown:
            raise ObserveError(f"{where}: observe: unknown field(s) {', '.join(unknown)}; {expected}")
        raise ObserveError(f"{where}: observe.every_hours: {expected}, found {hours!r}")
    raise ObserveError(f"{where}: observe: {expected}, found {raw!r}")


def parse_probe(raw: Any, *, where: str) -> str:
    """A registry entry's `observe.probe`: `chat` (the default: one one-token chat completion) or `models` (the
    provider's model listing)."""
    probe = raw.get("probe", CHAT_PROBE) if isinstance(raw, Mapping) else CHAT_PROBE
    if probe not in PROBES:
        raise ObserveError(f"{where}: observe.probe: expected one of {', '.join(PROBES)}, found {probe!r}")
    return probe


@dataclass(frozen=True)
class ServedVersion:
    """What the endpoint reported: the served model id and its system fingerprint ('' when it sends none)."""

    served_model: str
    fingerprint: str

    @property
    def data_version(self) -> str:
        payload = json.dumps([self.served_model, self.fingerprint], ensure_ascii=False)
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:16]

    @property
    def epoch(self) -> str:
        """The epoch tag of answers asked while this version was served (a valid `--sovereignty-epoch` tag)."""
        return epoch_of(self.data_version)


def epoch_of(data_version: str) -> str:
    return f"{EPOCH_PREFIX}{data_version[:12]}"


def observe_openai(settings: Mapping[str, Any], *, timeout_s: float = 30.0) -> ServedVersion:
    """One one-token chat completion to an OpenAI-compatible endpoint (`base_url`, `model`, the key in the variable
    `api_key_env` names); its `model` and `system_fingerprint`. Raises ObserveError naming the endpoint."""
    base_url, model, headers = _endpoint(settings)
    body = {"model": model, "messages": [{"role": "user", "content": PROBE_PROMPT}],
            str(settings.get("token_limit_param") or "max_tokens"): 1}
    request = urllib.request.Request(f"{base_url}/chat/completions", data=json.dumps(body).encode("utf-8"),
                                     headers=headers, method="POST")
    answer = _answer(request, base_url, model, timeout_s)
    if not isinstance(answer, Mapping) or not isinstance(answer.get("model"), str):
        raise ObserveError(f"{base_url}: observing {model!r}: the answer names no served `model`")
    return ServedVersion(answer["model"], str(answer.get("system_fingerprint") or ""))


def _answer(request: urllib.request.Request, base_url: str, model: str, timeout_s: float, *,
            not_found: str | None = None) -> Any:
    """The JSON an observation request is answered with; ObserveError naming the endpoint when it fails (a 404 in
    the words of `not_found`, when given)."""
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as exc:
        if exc.code == 404 and not_found:
            raise ObserveError(f"{base_url}: observing {model!r}: {not_found}") from None
        raise ObserveError(f"{base_url}: observing {model!r} failed: {exc}") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise ObserveError(f"{base_url}: observing {model!r} failed: {exc}") from None


def _endpoint(settings: Mapping[str, Any]) -> tuple[str, str, dict[str, str]]:
    """The entry's base URL (no trailing slash), model name and request headers (its key, when set)."""
    base_url = str(settings.get("base_url") or "https://api.openai.com/v1").rstrip("/")
    key_env = str(settings.get("api_key_env") or "OPENAI_API_KEY")
    headers = {"Content-Type": "application/json"}
    if os.environ.get(key_env):
        headers["Authorization"] = f"Bearer {os.environ[key_env]}"
    return base_url, str(settings.get("model") or ""), headers


def observe_listing(settings: Mapping[str, Any], *, timeout_s: float = 30.0) -> ServedVersion:
    """The provider's listing of the entry's model, `GET {base_url}/models/{model}` (OpenAI's *retrieve model*: `id`,
    `object`, `created`, `owned_by`): the served model is its `id`, the fingerprint its `created` and `owned_by`.
    Raises ObserveError naming the endpoint, also when the listing does not know the model (404)."""
    base_url, model, headers = _endpoint(settings)
    url = f"{base_url}/models/{urllib.parse.quote(model, safe='')}"
    request = urllib.request.Request(url, headers=headers, method="GET")
    answer = _answer(request, base_url, model, timeout_s, not_found="the model listing does not know it (404)")
    if not isinstance(answer, Mapping) or not isinstance(answer.get("id"), str):
        raise ObserveError(f"{base_url}: observing {model!r}: the model listing names no `id`")
    fingerprint = f"created={answer.get('created')} owned_by={answer.get('owned_by')}"
    return ServedVersion(answer["id"], fingerprint)


def observe_endpoint(settings: Mapping[str, Any], probe: str = CHAT_PROBE) -> ServedVersion:
    """Observe an entry's endpoint with its probe (`chat` or `models`)."""
    return observe_listing(settings) if probe == MODELS_PROBE else observe_openai(settings)


def due(last_observed: float | None, every_hours: float, now: float) -> bool:
    """Whether an entry observed at `last_observed` (epoch seconds; None: never) is due at `now`."""
    return last_observed is None or now - last_observed >= every_hours * 3600.0
