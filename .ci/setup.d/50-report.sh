#!/usr/bin/env bash
# Report stage: poppler-utils (pdftoppm: the PDF render test turns a page into PNG),
# Debian's chromium + chromium-driver (the history page and report are tested in a real
# headless browser), DejaVu fonts for weasyprint and chromium, and the report's matplotlib and
# weasyprint in the venv (selenium, the WebDriver client of those tests, is one of pyproject's
# test-tools: 24-test-tools.sh). Safe to re-run: it installs only what is missing.
set -euo pipefail
cd "$(dirname "$0")/../.."

APT_PACKAGES=(poppler-utils chromium chromium-driver fonts-dejavu-core)
missing=()
for p in "${APT_PACKAGES[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  echo "==> apt: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # Another setup step may hold the dpkg lock for a moment: wait for it instead of failing.
  for attempt in 1 2 3 4 5; do
    if apt-get update -qq -o DPkg::Lock::Timeout=120 \
      && apt-get install -y -qq --no-install-recommends -o DPkg::Lock::Timeout=120 \
        "${missing[@]}" >/dev/null; then
      break
    fi
    echo "50-report: apt attempt $attempt failed; retrying" >&2
    sleep 10
  done
fi
for bin in pdftoppm chromium chromedriver; do
  command -v "$bin" >/dev/null || { echo "50-report: $bin did not install" >&2; exit 1; }
done
# Presence first (importing weasyprint and matplotlib costs seconds); imported after an install.
if ! .venv/bin/python -c "import importlib.util as u, sys
sys.exit(not all(u.find_spec(m) for m in ('matplotlib', 'weasyprint')))"; then
  .venv/bin/pip install -q --disable-pip-version-check \
    'matplotlib>=3.8,<4' 'weasyprint>=60' 2>&1 | grep -v "^WARNING: Location" || true
  .venv/bin/python -c "import matplotlib, weasyprint" \
    || { echo "50-report: python deps did not install" >&2; exit 1; }
fi
