"""The report stage: the audit record (run.json), HTML/PDF report, manifest, diff, history page.

Everything here reads what the other stages recorded in a run directory and
nothing else: the verdict combines the stages' own recorded verdicts and
statuses, it is never re-derived from raw figures. Modules, one job each:
`record` (the pydantic model of run.json), `assemble` (stage files -> record),
`matrix` (certified reference data and the comparison), `plots`, `html`, `pdf`,
`manifest` (MANIFEST.sha256 and verify), `diff` (two runs), `serve` (history
page), `build` (the report stage end to end).
"""
