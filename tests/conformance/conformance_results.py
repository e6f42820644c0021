"""The kit's section results of this test session, for conftest's terminal summary."""

# runtime config key -> {"label": runtime label, "sections": {section name: SectionResult}}
REPORTS = {}


def record_section(runtime_config, runtime, report):
    """Keeps a section's results for the terminal summary."""
    entry = REPORTS.setdefault(runtime_config.key, {"label": runtime.label, "sections": {}})
    entry["sections"].update(report.sections)
