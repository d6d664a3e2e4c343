"""The audit report across every benchmark: one unpartitioned asset, `audit_report`."""

from __future__ import annotations

from sctc_assets.assets.report.audit import audit_report

REPORT_ASSETS = [audit_report]
