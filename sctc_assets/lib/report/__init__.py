"""The audit report: every benchmark's tables as one self-contained HTML page and a Markdown file, with the
papers' figures, a scorecard across models and the provenance of every number (pure Python, no Dagster)."""

from sctc_assets.lib.report.build import ReportResult, build_report
from sctc_assets.lib.report.inputs import ReportInputs, read_table, read_tables
from sctc_assets.lib.report.provenance import platform_info, response_usage

__all__ = ["ReportInputs", "ReportResult", "build_report", "platform_info",
           "read_table", "read_tables", "response_usage"]
