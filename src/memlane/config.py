"""Settings: ``memlane.toml`` in the home folder, overridden by ``MEMLANE_<SECTION>__<KEY>``.

The home folder is ``--home`` / ``MemoryEngine.open(home=...)``, else ``$MEMLANE_HOME``, else
``~/.memlane``. Nothing is read at import time: :meth:`Settings.load` reads when asked.

Precedence (highest first): explicit values passed to :meth:`Settings.load`, environment
variables, the TOML file, the defaults below. Invalid values raise :class:`ConfigError` naming
the key, the value and what is allowed.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from contextvars import ContextVar
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
)

from memlane.config_integrations import HooksSettings, ScopeSettings
from memlane.config_read import InjectionSettings as InjectionSettings
from memlane.config_read import RetrievalSettings as RetrievalSettings
from memlane.config_server import ServerSettings as ServerSettings
from memlane.embeddings.profiles import MINILM, PROFILE_KEYS, Profile, profile_for
from memlane.errors import ConfigError
from memlane.privacy import PrivacySettings
from memlane.proxy.settings import ProxySettings
from memlane.types import MemoryType

CONFIG_FILENAME = "memlane.toml"
DEFAULT_HOME = "~/.memlane"

_TYPE_VALUES = frozenset(t.value for t in MemoryType)
#: ``[embedding] model`` values of the local provider (memlane.embeddings.LOCAL_MODELS).
LOCAL_MODEL_NAMES = (
    "all-MiniLM-L6-v2",
    "all-MiniLM-L6-v2-fp32",
    "all-MiniLM-L6-v2-q8",
    "multilingual-e5-small",
)


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)


class StoreSettings(_Section):
    """``[store]``: where memories live."""

    backend: Literal["sqlite", "postgres"] = "sqlite"
    #: SQLite file; relative paths are relative to the home folder.
    path: str = "memlane.db"
    #: Milliseconds a writer waits for another process's transaction before giving up.
    busy_timeout_ms: int = Field(default=60_000, ge=100)
    # --- backend = "postgres" (docs/postgres.md) ---------------------------------------------
    #: libpq connection string or URI, e.g. ``postgresql://memlane@db.internal:5432/memlane``
    #: (``MEMLANE_STORE__DSN``; a password is better in ``PGPASSWORD`` or ``~/.pgpass``).
    dsn: str = ""
    #: Connections the pool keeps open, and at most opens (one per concurrent call).
    pool_min_size: int = Field(default=1, ge=0, le=1000)
    pool_max_size: int = Field(default=10, ge=1, le=1000)
    #: Seconds to wait for the server when connecting.
    connect_timeout_s: float = Field(default=10.0, gt=0)
    #: HNSW index build parameters (pgvector's defaults): graph degree and build candidates.
    #: Read when the index is created; changing them later needs REINDEX (docs/postgres.md).
    hnsw_m: int = Field(default=16, ge=2, le=100)
    hnsw_ef_construction: int = Field(default=64, ge=4, le=1000)
    #: HNSW candidates kept per query (pgvector's default 40): more = better recall, slower.
    hnsw_ef_search: int = Field(default=40, ge=1, le=1000)

    @model_validator(mode="after")
    def _dsn_for_postgres(self) -> StoreSettings:
        if self.backend == "postgres" and not self.dsn.strip():
            raise ValueError(
                'dsn: backend "postgres" needs [store] dsn (or MEMLANE_STORE__DSN), e.g. '
                "postgresql://user@host:5432/memlane; `memlane postgres start` prints one"
            )
        return self


class EmbeddingSettings(_Section):
    """``[embedding]``: the model that turns text into vectors (docs/embeddings.md).

    The thresholds that depend on the model's cosine scale (``[dedup]`` auto_reject, replace,
    gray_low; ``[retrieval]`` floor_relative, floor_absolute; ``[injection]`` semantic_threshold)
    default to the model's profile (:mod:`memlane.embeddings.profiles`); values set explicitly win.
    """

    #: ``local`` = a model shipped in a PyPI package, run on this machine (offline);
    #: ``openai`` = any OpenAI-compatible ``/v1/embeddings`` server (``base_url``, ``model``);
    #: ``hash`` = the small deterministic embedder (tests, no model; not semantic).
    provider: Literal["local", "hash", "openai"] = "local"
    #: Local: ``all-MiniLM-L6-v2`` (int8, default), ``all-MiniLM-L6-v2-fp32`` (torch, the
    #: ``reference`` extra), ``all-MiniLM-L6-v2-q8`` (int8 activations too, the ``local-q8``
    #: extra) or ``multilingual-e5-small`` (the ``e5`` extra); another name is an
    #: error, not silently the default. OpenAI: the model name the server expects.
    model: str = "all-MiniLM-L6-v2"
    #: Dimension of the ``hash`` embedder (the local models are 384).
    dimension: int = Field(default=384, ge=8, le=4096)
    batch_size: int = Field(default=64, ge=1, le=4096)
    #: Query embeddings cached per process (LRU entries); 0 disables.
    cache_size: int = Field(default=2048, ge=0)
    #: OpenAI provider: the API's base URL (``None``: api.openai.com), e.g.
    #: ``http://localhost:11434/v1`` for Ollama.
    base_url: str | None = None
    #: OpenAI provider: the environment variable that holds the API key (never the key itself).
    api_key_env: str | None = None
    #: OpenAI provider: the ``dimensions`` request parameter and the vector length (``None``: not
    #: sent; the length is the known model's, see memlane/embeddings/openai.py).
    dimensions: int | None = Field(default=None, ge=1, le=65536)
    timeout_s: float = Field(default=30.0, gt=0)
    #: OpenAI provider: retries of a failed call (429, 5xx, connection errors) by the SDK.
    max_retries: int = Field(default=2, ge=0, le=10)

    @model_validator(mode="before")
    @classmethod
    def _no_key_in_file(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and "api_key" in data:
            raise ValueError(
                "api_key: an API key must not be written in the settings; set api_key_env to "
                "the name of the environment variable that holds it"
            )
        return data

    @field_validator("model")
    @classmethod
    def _known_local_model(cls, value: str, info: ValidationInfo) -> str:
        provider = info.data.get("provider")
        if provider == "local" and value not in LOCAL_MODEL_NAMES:
            raise ValueError(f"{value!r} is not a local model; one of {list(LOCAL_MODEL_NAMES)}")
        if provider == "openai" and not value.strip():
            raise ValueError("provider 'openai' needs [embedding] model (a model name)")
        return value

    def profile(self) -> Profile:
        """The active model's :class:`~memlane.embeddings.profiles.Profile`."""
        name = f"hash-{self.dimension}" if self.provider == "hash" else self.model
        return profile_for(name, dimension=self.dimensions)


class LLMSettings(_Section):
    """``[llm]``: optional model for gray-zone dedup verification and learning (none by default).

    ``openai`` is any OpenAI-compatible chat-completions server (OpenAI, Ollama, vLLM, LM Studio,
    llama.cpp's server: set ``base_url``); ``anthropic`` is the Anthropic messages API. The key is
    read from the environment variable named by ``api_key_env``, never from the file.
    """

    provider: Literal["none", "openai", "anthropic"] = "none"
    #: The model name the provider expects (required unless provider is ``none``).
    model: str = ""
    #: The API's base URL (``None``: the provider's official endpoint).
    base_url: str | None = None
    #: The name of the environment variable that holds the API key.
    api_key_env: str | None = None
    timeout_s: float = Field(default=20.0, gt=0)
    #: Retries of a failed call (429, 5xx, connection errors) by the SDK, with backoff.
    max_retries: int = Field(default=2, ge=0, le=10)
    temperature: float = Field(default=0.0, ge=0, le=2)
    #: Most tokens one answer may take.
    max_tokens: int = Field(default=1024, ge=16, le=100_000)

    @model_validator(mode="before")
    @classmethod
    def _no_key_in_file(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and "api_key" in data:
            raise ValueError(
                "api_key: an API key must not be written in the settings; set api_key_env to "
                "the name of the environment variable that holds it"
            )
        return data

    @model_validator(mode="after")
    def _model_named(self) -> LLMSettings:
        if self.provider != "none" and not self.model.strip():
            raise ValueError(f"model: provider {self.provider!r} needs [llm] model (a model name)")
        return self


class DedupSettings(_Section):
    """``[dedup]``: write-path thresholds (cosine similarity, 0..1). See docs/dedup.md.

    The three thresholds default to the active model's profile (these defaults: all-MiniLM-L6-v2).
    """

    auto_reject: float = Field(default=MINILM.auto_reject, ge=0, le=1)
    replace: float = Field(default=MINILM.replace, ge=0, le=1)
    gray_low: float = Field(default=MINILM.gray_low, ge=0, le=1)
    #: Longest memory text accepted, in characters.
    max_chars: int = Field(default=50_000, ge=1)
    #: Nearest memories compared with each new one.
    neighbours: int = Field(default=5, ge=1, le=100)


class AgentSettings(_Section):
    """``[agents.<name>]``: per-agent overrides."""

    injection: dict[str, Any] = Field(default_factory=dict)


class _TomlSource(PydanticBaseSettingsSource):
    def __init__(self, settings_cls: type[BaseSettings], data: Mapping[str, Any]) -> None:
        super().__init__(settings_cls)
        self._data = dict(data)

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return self._data.get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return self._data


class Settings(BaseSettings):
    """All settings. Build with :meth:`Settings.load`; values are immutable."""

    model_config = SettingsConfigDict(
        env_prefix="MEMLANE_",
        env_nested_delimiter="__",
        extra="forbid",
        frozen=True,
        validate_default=True,
    )

    store: StoreSettings = StoreSettings()
    embedding: EmbeddingSettings = EmbeddingSettings()
    llm: LLMSettings = LLMSettings()
    dedup: DedupSettings = DedupSettings()
    retrieval: RetrievalSettings = RetrievalSettings()
    injection: InjectionSettings = InjectionSettings()
    server: ServerSettings = ServerSettings()
    privacy: PrivacySettings = PrivacySettings()  # memlane.privacy
    scope: ScopeSettings = ScopeSettings()
    hooks: HooksSettings = HooksSettings()
    proxy: ProxySettings = ProxySettings()  # memlane.proxy
    agents: dict[str, AgentSettings] = Field(default_factory=dict)
    #: Resolved home folder (set by load(); not read from the file).
    home: str = ""

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        toml = _TomlSource(settings_cls, _TOML_DATA.get())
        return (init_settings, env_settings, toml)

    # ----------------------------------------------------------------------------------------
    @classmethod
    def load(cls, home: str | os.PathLike[str] | None = None, **overrides: Any) -> Settings:
        """Read ``<home>/memlane.toml`` (if present) and ``MEMLANE_*`` env variables.

        Raises:
            ConfigError: the file is not valid TOML, or a value is invalid (message names the
                key, the value and what is allowed).
        """
        home_path = resolve_home(home)
        path = home_path / CONFIG_FILENAME
        text = path.read_text(encoding="utf-8") if path.is_file() else ""
        return cls.from_text(home_path, text, source=str(path), **overrides)

    @classmethod
    def from_text(
        cls, home: str | os.PathLike[str], text: str, *, source: str = "<text>", **overrides: Any
    ) -> Settings:
        """:meth:`load` with ``text`` as the content of ``memlane.toml`` (the server checks a
        file it is about to write with it). Raises :class:`ConfigError`."""
        home_path = Path(home)
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise toml_error(source, exc) from exc
        token = _TOML_DATA.set(data)  # read by the TOML source, in this thread only
        try:
            settings = cls(home=str(home_path), **overrides)
        except ValidationError as exc:
            raise _config_error(exc) from None
        except SettingsError as exc:  # an env value that should be JSON and is not
            field = str(exc).split('"')[1] if str(exc).count('"') >= 2 else "*"
            key = f"MEMLANE_{field.upper()}"
            raise ConfigError(
                key, os.environ.get(key, "<env>"), f"not valid JSON ({exc})"
            ) from None
        finally:
            _TOML_DATA.reset(token)
        settings = settings.with_profile()
        settings.check()
        return settings

    def with_profile(self) -> Settings:
        """These settings with every profile key (:data:`PROFILE_KEYS`) the user left unset taken
        from the active model's profile (``[embedding]``); set keys are kept."""
        values = self.embedding.profile().settings()
        updates: dict[str, Any] = {}
        for section, keys in PROFILE_KEYS.items():
            current = getattr(self, section)
            unset = {k: values[section][k] for k in keys if k not in current.model_fields_set}
            if unset:
                updates[section] = current.model_copy(update=unset)
        return self.model_copy(update=updates) if updates else self

    def check(self) -> None:
        """Cross-field rules: threshold order, per-agent overrides. Raises :class:`ConfigError`."""
        d = self.dedup
        if d.gray_low > d.replace:
            raise ConfigError(
                "dedup.gray_low", d.gray_low, f"must be <= dedup.replace ({d.replace})"
            )
        if d.replace > d.auto_reject:
            raise ConfigError(
                "dedup.replace", d.replace, f"must be <= dedup.auto_reject ({d.auto_reject})"
            )
        for name in self.agents:
            try:
                self.injection_for(name)
            except ValidationError as exc:
                raise _config_error(exc, prefix=f"agents.{name}.injection") from None

    @property
    def home_path(self) -> Path:
        return Path(self.home)

    @property
    def db_path(self) -> Path:
        p = Path(self.store.path).expanduser()
        return p if p.is_absolute() else self.home_path / p

    def injection_for(self, agent: str | None) -> InjectionSettings:
        """The injection settings for ``agent``: defaults merged with ``[agents.<agent>.injection]``."""
        if agent is None or agent not in self.agents or not self.agents[agent].injection:
            return self.injection
        return InjectionSettings.model_validate(
            {**self.injection.model_dump(), **self.agents[agent].injection}
        )


#: The TOML data of the :meth:`Settings.load` under way (a source has no other way in).
_TOML_DATA: ContextVar[Mapping[str, Any]] = ContextVar(
    "memlane_toml_data", default=MappingProxyType({})
)


def resolve_home(home: str | os.PathLike[str] | None = None) -> Path:
    """``home``, else ``$MEMLANE_HOME``, else ``~/.memlane`` (expanded, not created)."""
    raw = home if home is not None else os.environ.get("MEMLANE_HOME") or DEFAULT_HOME
    return Path(raw).expanduser().resolve()


class SettingProblem(ConfigError):
    """A :class:`ConfigError` (exit 5) whose message is its own sentence instead of "invalid
    setting KEY = VALUE: ...": for a problem that is not a bad value (a file that is not TOML, a
    port another process holds). ``key``, ``value`` and ``allowed`` as for :class:`ConfigError`."""

    def __init__(self, key: str, value: object, allowed: str, message: str) -> None:
        super().__init__(key, value, allowed)
        self.args = (message,)


_TOML_WHERE = re.compile(r"\s*\(at (line \d+, column \d+|end of document)\)\s*$")


def toml_error(source: str, exc: tomllib.TOMLDecodeError) -> ConfigError:
    """The file ``source`` is not TOML: one line naming the file, the line and column, the TOML
    problem and the fix (``exc``'s own text ends with "(at line L, column C)")."""
    text = str(exc)
    match = _TOML_WHERE.search(text)
    problem = _TOML_WHERE.sub("", text)
    where = f", {match.group(1)}" if match else ""
    allowed = f"not valid TOML{where}: {problem}"
    return SettingProblem(
        source,
        "<file>",
        allowed,
        f"{source} is not valid TOML{where}: {problem} (fix the file; docs/configuration.md "
        "shows every setting)",
    )


def _config_error(exc: ValidationError, prefix: str = "") -> ConfigError:
    err = exc.errors()[0]
    key = ".".join([*([prefix] if prefix else []), *map(str, err["loc"])]) or "<settings>"
    msg = err["msg"].removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        msg = "unknown setting (check the spelling; see docs/configuration.md)"
    value = err.get("input")
    if isinstance(value, str) and len(value) > 200:  # a 300,000-character owner name
        value = f"{value[:200]}... ({len(value):,} characters)"
    if isinstance(value, Mapping) and "api_key" in value:  # never echo a secret
        key, value, msg = f"{key}.api_key", "<hidden>", msg.removeprefix("api_key: ")
    elif any(w in f"{key} {str(value)[:10_000]}".lower() for w in ("token", "secret", "passw")):
        value = "<hidden>"  # a token in a misspelt place ([sever] token = ...): never echoed
    return ConfigError(key, value, msg)
