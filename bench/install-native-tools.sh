#!/usr/bin/env bash
# The native tools the conversion bench compares against (never a runtime dependency).
set -euo pipefail
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mupdf-tools poppler-utils ghostscript webp imagemagick libtiff-tools qpdf
