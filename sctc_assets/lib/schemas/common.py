"""Columns that mean the same in every table that has them."""

from __future__ import annotations

MODEL = ("string", "Registry key of the model (its `model` partition).")
LANG = ("string", "Prompting language: `zh_hans` (Simplified Chinese), `zh_hant` (Traditional Chinese) or `en`.")

# The answer columns every generation asset writes (`lib/generation.result_columns`).
ANSWER = {
    "prompt": ("string", "The prompt as sent to the model."),
    "response": ("string", "The model's answer text, reasoning blocks included; missing for an error."),
    "outcome": ("string", "`ok`, `refusal` (a content filter or an empty answer), `error` (failed after the "
                          "retries; never cached, asked again next time) or `truncated` (cut by the token limit with "
                          "nothing after its reasoning: raise the entry's max tokens)."),
    "outcome_message": ("string", "Why a refusal or an error happened (the API's message); missing for `ok`."),
    "input_tokens": ("int", "Prompt tokens the backend reported (missing when it reports none)."),
    "output_tokens": ("int", "Answer tokens the backend reported (missing when it reports none)."),
    "finish_reason": ("string", "Why generation stopped, as the backend reports it (`stop`, `length`, …)."),
    "cached": ("bool", "Whether the answer came from the response cache instead of a new model call."),
    "latency_s": ("float", "Seconds the model call took; missing for cached and replayed answers."),
    # Contract 1 (the `live` helper): older tables lack these three columns.
    "seed": ("int", "The seed sent with the request; missing when none was sent.", True),
    "served_model": ("string", "The model id the API answered with; missing for local and replayed answers.", True),
    "system_fingerprint": ("string", "The API's system fingerprint of the answer, when it gives one.", True),
    "batch_id": ("string", "The provider's id of the batch that answered it (`batch: true`); missing for a "
                           "synchronous call.", True),
    # Older tables lack these two columns too.
    "reasoning": ("string", "The model's reasoning, kept apart from the answer: the API's reasoning field "
                            "(`reasoning_content`, `reasoning`, `reasoning_details`) or the answer's `<think>` "
                            "blocks (which stay in `response`); missing when there is none.", True),
    "reasoning_tokens": ("int", "Reasoning tokens the API billed (part of `output_tokens`); missing when it "
                                "reports none.", True),
}

COMMON: dict[str, tuple] = {
    "model": MODEL,
    "lang": LANG,
    **ANSWER,
    "judge_model": ("string", "Registry key of the judge model that was asked."),
    "judge_answer": ("string", "The judge model's raw answer."),
    "judge_outcome": ("string", "Outcome of the judge call: `ok`, `refusal` or `error`."),
}
