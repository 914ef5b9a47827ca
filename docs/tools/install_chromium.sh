#!/usr/bin/env bash
# Make headless Chromium available for tests/test_docs_site.py (it opens the built site).
# Already installed: nothing to do. Otherwise, as root on Debian/Ubuntu, install the
# distribution's package; anywhere else, exit 1 (the test then skips and says why).
set -euo pipefail
for name in chromium chromium-browser google-chrome; do
  if command -v "$name" >/dev/null 2>&1; then
    command -v "$name"
    exit 0
  fi
done
if [ "$(id -u)" != "0" ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "chromium is not installed and cannot be installed here (needs root and apt-get)" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >&2
apt-get install -y -q --no-install-recommends chromium >&2
command -v chromium
