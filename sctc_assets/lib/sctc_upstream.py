"""Layout of the SC-TC-Bench repository's data files (github.com/brucelyu17/SC-TC-Bench), pinned to one commit."""

from __future__ import annotations

import re
from pathlib import Path

from sctc_assets.lib.varieties import MAINLAND, TAIWAN, VARIETIES

SCTC_COMMIT = "aaad554832988d6b3bcc0fa041968f62f87b9ba0"
SCTC_DEFAULT_URL = f"https://github.com/brucelyu17/SC-TC-Bench/archive/{SCTC_COMMIT}.tar.gz"
SCTC_MARKERS = ("source_data", "prompt", "response")
SCTC_ENV_VAR = "SCTC_UPSTREAM"

# Project language codes → the words upstream file names use.
UPSTREAM_LANG = {row.code: row.upstream_spelling for row in VARIETIES}

# The paper's 11 LLMs under their upstream file-name prefixes, in the order the authors' scripts use.
PAPER_MODELS = (
    "qwen", "baichuan2", "chatglm2", "breeze", "taiwan-llm", "ds",
    "gpt4o", "gpt4", "gpt3.5", "llama3-70b", "llama3-8b",
)

TERMS_FILE = "source_data/regional_term_and_definition.csv"
TERM_COLUMNS = ("conceptId", MAINLAND.upstream_spelling, TAIWAN.upstream_spelling, "definition_simplified",
                "definition_traditional", "category", "definition_source")


def term_prompt_file(lang: str, variant: int) -> str:
    return f"prompt/regional_term/{UPSTREAM_LANG[lang]}_{variant}.csv"


def term_response_file(upstream_name: str, lang: str, variant: int, *, no_think: bool = False) -> str:
    suffix = "_no_think" if no_think else ""
    return f"response/regional_term/raw/{upstream_name}_{UPSTREAM_LANG[lang]}_{variant}{suffix}.csv"


def term_judgement_file(upstream_name: str, lang: str, variant: int) -> str:
    return f"response/regional_term/correctness_annotated_by_gpt/{upstream_name}_{UPSTREAM_LANG[lang]}_{variant}.csv"


def term_details_file(lang: str, variant: int) -> str:
    return f"supplementary_data/regional_term/response_details_{UPSTREAM_LANG[lang]}_{variant}.csv"


def commit_of(root: Path) -> str | None:
    """The commit a GitHub archive's top folder names (`SC-TC-Bench-<sha>`), if any."""
    match = re.search(r"([0-9a-f]{7,40})$", Path(root).name)
    return match.group(1) if match else None


# Regional name task. Upstream prompt ids: 0 main, 1 popularity, 2 same name / different script, 3 gender balanced.
NAME_CANDIDATE_COLUMNS = ("trial_num", "mainland_name", "taiwan_name", "candidate_name")


def name_prompt_file(lang: str, prompt_id: int) -> str:
    return f"prompt/regional_name/{UPSTREAM_LANG[lang]}_{prompt_id}.csv"


def name_candidate_file(prompt_id: int) -> str:
    return f"source_data/candidate_name_list/prompt_id_{prompt_id}.csv"


def name_response_file(upstream_name: str, lang: str, prompt_id: int, *, stage: str = "raw") -> str:
    """`stage`: `raw` (the answers) or `final` (the authors' extracted name and region per answer)."""
    return f"response/regional_name/{stage}/{upstream_name}_{UPSTREAM_LANG[lang]}_{prompt_id}.csv"


def name_permutation_file(upstream_name: str, lang: str, permutations: int) -> str:
    return f"response/regional_name/permutation_final/{upstream_name}_{UPSTREAM_LANG[lang]}_{permutations}.csv"
