"""MkDocs hook: the README is the site's home page (one text, not two that drift apart). Its links point into
docs/ as GitHub shows them; on the site they are relative to docs/ itself."""

from __future__ import annotations

import re
from pathlib import Path

from mkdocs.structure.files import File, Files


def readme_as_home(text: str) -> str:
    return re.sub(r"\]\(docs/", "](", text)


def on_files(files: Files, config) -> Files:
    readme = Path(config.config_file_path).parent / "README.md"
    files.append(File.generated(config, "index.md", content=readme_as_home(readme.read_text(encoding="utf-8"))))
    return files
