"""The Taiwan sovereignty bilingual benchmark (Ko & Littl3Lobst3r 2026), in pure Python: upstream files, prompts,
red-flag matching, the scoring rules, the language-bias metrics, the review queue and the Pro study's JSON format."""
