"""Local models through Hugging Face `transformers`: hub ids, local folders, GGUF files and the embedded default.

torch and transformers are imported inside the methods, so loading the Dagster definitions stays fast. A model and
its tokenizer are loaded once per process (module-level cache, guarded by a lock) and shared by every backend
instance with the same weights, device and dtype. A local GGUF file is de-quantized once and kept as safetensors
(`gguf_cache.py`), so later process starts load in seconds.

Two generation engines (`engine`):
- `continuous` (default): continuous batching (`continuous_batching.py`): each answer stops at its own end and its
  slot is refilled, the prompts' shared beginning is computed once, and each answer is reported (and cached by
  `ModelBackend.generate`) the moment it ends;
- `generate`: `model.generate` on left-padded batches of prompts sorted by length, each batch reported when its
  longest answer ends (the engine before continuous batching; models the continuous engine cannot run fall back to
  it).
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.util
import json
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence

from pydantic import Field

from sctc_assets.backends.base import BackendUnavailable, ModelBackend, ResultCallback
from sctc_assets.lib.cost_estimate import TokenCounter, json_counter
from sctc_assets.lib.generation import GenerationRequest, GenerationResult

_DTYPES = ("auto", "float32", "float16", "bfloat16")
ENGINES = ("continuous", "generate")
# Part of the cache identity of `continuous` answers; bump it when a change to the engine can change an answer.
CONTINUOUS_ENGINE_VERSION = "continuous/1"
# Tokens that end a turn in common chat formats. They count as end-of-sequence when the chat template uses them
# (GGUF files often record only one eos id, while the hub's generation_config.json lists several).
_END_OF_TURN_TOKENS = ("<|im_end|>", "<|eot_id|>", "<|end|>", "<end_of_turn>", "<|END_OF_TURN_TOKEN|>", "<|eom_id|>")


@dataclass
class LoadedModel:
    """A model, its tokenizer and the token ids generation needs, shared across backend instances."""

    model: Any
    tokenizer: Any
    input_device: Any
    eos_token_ids: list[int]
    pad_token_id: int
    load_seconds: float = 0.0
    info: dict[str, Any] = field(default_factory=dict)


# torch's OpenMP threads spin while they wait for work. On a machine with more busy threads than cores (a shared CI
# runner, a UI backfill running partitions side by side) the spinning takes CPU from the threads doing the work: on
# 2 shared cores it cost 2.5x the CPU seconds (bench/embedded_speed.py --omp-wait-policy). Sleeping instead costs
# little on an idle machine, and never changes an answer. The OpenMP runtime reads the setting once, when torch
# loads, so it is set before the first `import torch`, and only when the user has not chosen.
if "torch" not in sys.modules:
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

_MODELS: dict[tuple, LoadedModel] = {}
_MODELS_LOCK = threading.Lock()


def clear_model_cache() -> None:
    """Forget every loaded model (frees memory once no backend holds a reference)."""
    with _MODELS_LOCK:
        _MODELS.clear()


@functools.cache
def _torch_build_has_gpu() -> Optional[bool]:
    """Whether the installed torch was built for CUDA or ROCm, read from its `version.py` without importing torch
    (which takes seconds, where `sctc plan` needs only this answer); None when that cannot be told (no torch, an
    unexpected file): the caller then imports torch."""
    try:
        spec = importlib.util.find_spec("torch")
        if spec is None or not spec.origin:
            return None
        tree = ast.parse(Path(spec.origin).with_name("version.py").read_text(encoding="utf-8"))
    except (ImportError, OSError, SyntaxError, ValueError):
        return None
    values: dict[str, Any] = {}
    for node in tree.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            target, value = node.target.id, node.value
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            target, value = node.targets[0].id, node.value
        else:
            continue
        try:
            values[target] = ast.literal_eval(value)
        except ValueError:
            values[target] = ...  # not a literal: unknown
    if values.get("cuda", ...) is ... or values.get("hip", ...) is ...:
        return None
    return values["cuda"] is not None or values["hip"] is not None


def _cpu_without_torch(device: str) -> bool:
    """True when `device` ("auto" or "cpu") certainly means the CPU without asking torch: torch is not imported yet
    and was built for neither CUDA nor ROCm, so `torch.cuda.is_available()` could only answer False. Once torch is
    imported, it is asked (as before; tests that replace `torch.cuda.is_available` rely on it)."""
    return ((device or "auto").strip().lower() in ("auto", "cpu") and "torch" not in sys.modules
            and _torch_build_has_gpu() is False)


def resolve_device(device: str) -> tuple[str, Optional[str]]:
    """(`placement`, `device_map`): placement is "auto", "cpu", "cuda", "cuda:N" or "mps"."""
    if _cpu_without_torch(device):
        return "cpu", None
    import torch

    name = (device or "auto").strip().lower()
    if name == "auto":
        return ("auto", "auto") if torch.cuda.is_available() else ("cpu", None)
    if name == "cpu":
        return "cpu", None
    if name == "cuda" or (name.startswith("cuda:") and name[5:].isdigit()):
        if not torch.cuda.is_available():
            raise BackendUnavailable(f"device {device!r} requested but CUDA is not available to torch")
        return name, name
    if name == "mps":
        if not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
            raise BackendUnavailable("device 'mps' requested but MPS is not available to torch")
        return name, name
    raise BackendUnavailable(f"unknown device {device!r}: use auto, cpu, cuda, cuda:N or mps")


def resolve_dtype(dtype: str, placement: str) -> Any:
    import torch

    name = (dtype or "auto").strip().lower()
    if name not in _DTYPES:
        raise BackendUnavailable(f"unknown dtype {dtype!r}: use one of {', '.join(_DTYPES)}")
    if name == "auto":
        if placement == "auto" or placement.startswith("cuda"):
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return torch.float32
    return getattr(torch, name)


def resolved_precision(device: str, dtype: str) -> tuple[str, str]:
    """(device type, dtype name) that `device` and `dtype` stand for on this machine, e.g. ("cpu", "float32")."""
    if _cpu_without_torch(device):  # what `resolve_dtype` answers for the CPU, without importing torch
        name = (dtype or "auto").strip().lower()
        if name not in _DTYPES:
            raise BackendUnavailable(f"unknown dtype {dtype!r}: use one of {', '.join(_DTYPES)}")
        return "cpu", "float32" if name == "auto" else name
    placement, _ = resolve_device(device)
    device_type = "cuda" if placement == "auto" else placement.split(":")[0]
    return device_type, str(resolve_dtype(dtype, placement)).removeprefix("torch.")


def _split_source(source: str, gguf_file: Optional[str]) -> tuple[str, Optional[str]]:
    """A local `.gguf` file becomes (its folder, its name); folders and hub ids pass through."""
    path = Path(source).expanduser()
    if path.is_file():
        if gguf_file and gguf_file != path.name:
            raise BackendUnavailable(f"model {source!r} is a file, but gguf_file names another one ({gguf_file!r})")
        return str(path.parent.resolve()), path.name
    if path.is_dir():
        return str(path.resolve()), gguf_file
    return source, gguf_file


def _end_token_ids(tokenizer: Any, model: Any) -> list[int]:
    ids: list[int] = []

    def add(value: Any) -> None:
        for item in value if isinstance(value, (list, tuple)) else [value]:
            if isinstance(item, int) and item >= 0 and item not in ids:
                ids.append(item)

    add(tokenizer.eos_token_id)
    add(getattr(model.generation_config, "eos_token_id", None))
    template = getattr(tokenizer, "chat_template", None) or ""
    if not isinstance(template, str):
        template = json.dumps(template, default=str)
    vocab = tokenizer.get_vocab()
    for token in _END_OF_TURN_TOKENS:
        if token in template and token in vocab:
            add(vocab[token])
    if "<|endoftext|>" in vocab and "<|endoftext|>" in getattr(tokenizer, "all_special_tokens", []):
        add(vocab["<|endoftext|>"])
    return ids


def load_model(
    source: str,
    gguf_file: Optional[str],
    revision: Optional[str],
    tokenizer_source: str,
    tokenizer_gguf_file: Optional[str],
    device: str,
    dtype: str,
    trust_remote_code: bool,
    gguf_sha256: Optional[str] = None,
) -> LoadedModel:
    """Load tokenizer and model (no caching in memory here: see `TransformersBackend._loaded`).

    With `gguf_sha256` (the verified hash of the local GGUF file `source/gguf_file`), the de-quantized weights and
    the tokenizer come from the on-disk cache of `gguf_cache.py`, filled by the first load.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from sctc_assets.lib.gguf_reading import gguf_parsed_once

    started = time.monotonic()
    placement, device_map = resolve_device(device)
    torch_dtype = resolve_dtype(dtype, placement)
    model_kwargs: dict[str, Any] = {"dtype": torch_dtype, "trust_remote_code": trust_remote_code}
    if device_map is not None:
        model_kwargs["device_map"] = device_map

    def from_source() -> tuple[Any, Any]:
        tokenizer_kwargs: dict[str, Any] = {"trust_remote_code": trust_remote_code}
        if tokenizer_gguf_file:
            tokenizer_kwargs["gguf_file"] = tokenizer_gguf_file
        if revision and tokenizer_source == source:
            tokenizer_kwargs["revision"] = revision
        extra = {"gguf_file": gguf_file} if gguf_file else {}
        if revision:
            extra["revision"] = revision
        with gguf_parsed_once():
            tokenizer = AutoTokenizer.from_pretrained(tokenizer_source, **tokenizer_kwargs)
            return AutoModelForCausalLM.from_pretrained(source, **model_kwargs, **extra), tokenizer

    def from_folder(folder: Path) -> tuple[Any, Any]:
        from transformers import PreTrainedTokenizerFast

        # The saved tokenizer.json as it is: AutoTokenizer would rebuild it as the architecture's own class, which
        # may add steps the GGUF's tokenizer does not have (Qwen2Tokenizer adds NFC normalization).
        tokenizer = PreTrainedTokenizerFast.from_pretrained(str(folder))
        return AutoModelForCausalLM.from_pretrained(str(folder), **model_kwargs), tokenizer

    # The cached tokenizer is the GGUF's own; a separately configured tokenizer is loaded as usual.
    own_tokenizer = tokenizer_source == source and tokenizer_gguf_file == gguf_file
    weights = "converted from GGUF" if gguf_file else "loaded"
    try:
        if gguf_file and gguf_sha256 and own_tokenizer and Path(source, gguf_file).is_file():
            from sctc_assets.backends.gguf_cache import load_through_cache

            model, tokenizer, weights = load_through_cache(
                from_source, from_folder, gguf_sha256=gguf_sha256, gguf_name=gguf_file,
                dtype=str(torch_dtype).removeprefix("torch."))
        else:
            model, tokenizer = from_source()
    except (OSError, ValueError, ImportError) as exc:
        raise BackendUnavailable(
            f"cannot load {source!r}{f' ({gguf_file})' if gguf_file else ''} with transformers:"
            f" {type(exc).__name__}: {exc}"
        ) from exc
    if device_map is None and placement != "cpu":
        model = model.to(placement)
    model.eval()
    eos_ids = _end_token_ids(tokenizer, model)
    pad_id = tokenizer.pad_token_id
    if pad_id is None:
        pad_id = getattr(model.generation_config, "pad_token_id", None)
    if pad_id is None:
        pad_id = eos_ids[0] if eos_ids else 0
    input_device = model.get_input_embeddings().weight.device
    return LoadedModel(
        model=model,
        tokenizer=tokenizer,
        input_device=input_device,
        eos_token_ids=eos_ids,
        pad_token_id=int(pad_id),
        load_seconds=time.monotonic() - started,
        info={"placement": placement, "dtype": str(torch_dtype), "device_map": device_map, "weights": weights},
    )


class TransformersBackend(ModelBackend):
    """A causal language model run in-process with `transformers` (CPU, CUDA or MPS)."""

    backend_name = "transformers"
    supports_logprobs = True

    model: str = Field(default="", description="Hub id, local folder, or local .gguf file (unused with `embedded`).")
    gguf_file: Optional[str] = Field(default=None, description="GGUF file name inside `model` (hub repo or folder).")
    embedded: Optional[str] = Field(
        default=None,
        description="Name of an embedded artifact (see lib/embedded_model.py), e.g. qwen2.5-coder-0.5b-instruct-q4_k_m;"
        " the verified file replaces `model`/`gguf_file`.",
    )
    revision: Optional[str] = Field(default=None, description="Hub revision (branch, tag or commit).")
    tokenizer: Optional[str] = Field(default=None, description="Tokenizer source when it differs from `model`.")
    device: str = Field(default="auto", description="auto (CUDA with device_map=auto, else CPU), cpu, cuda, cuda:N, mps.")
    dtype: str = Field(default="auto", description="auto (bfloat16 on CUDA, float32 otherwise), float32, float16, bfloat16.")
    trust_remote_code: bool = Field(default=False, description="Run model code from the hub repository. Off unless needed.")
    engine: str = Field(
        default="continuous",
        description="continuous (each answer stops at its own end, its slot is refilled, shared prompt beginnings"
        " are computed once) or generate (transformers' generate on padded batches).",
    )
    cache_converted_weights: bool = Field(
        default=True, description="Keep a local GGUF file's de-quantized weights as safetensors in the"
        " machine's download cache (weights/), so later starts in any data folder skip the conversion.")
    batch_size: int = Field(default=8, description="Prompts per forward pass (continuous: rows decoded at once).")
    max_new_tokens: int = 256
    temperature: float = Field(default=0.0, description="0 means greedy decoding.")
    top_p: Optional[float] = None
    seed: int = 2024
    system_prompt: Optional[str] = Field(default=None, description="System message for requests that have none.")
    use_chat_template: bool = Field(
        default=True, description="Render the tokenizer's chat template (falls back to plain user text without one)."
    )

    # --- configuration -------------------------------------------------------------------------------------------

    def _artifact(self):
        from sctc_assets.lib.embedded_model import get_artifact

        return get_artifact(self.embedded) if self.embedded else None

    def identity(self) -> dict[str, Any]:
        # "auto" is resolved: float32 on a CPU and bfloat16 on a GPU give different answers to the same request.
        device_type, dtype = resolved_precision(self.device, self.dtype)
        params: dict[str, Any] = {
            "temperature": self.temperature,
            "top_p": self.top_p,
            "max_new_tokens": self.max_new_tokens,
            "seed": self.seed,
            "system_prompt": self.system_prompt,
            "dtype": dtype,
        }
        if not self.use_chat_template:
            params["use_chat_template"] = False
        artifact = self._artifact()
        identity: dict[str, Any] = {"backend": self.backend_name}
        if artifact is not None:
            identity.update(model=artifact.name, sha256=artifact.sha256, gguf_file=artifact.hub_filename)
        else:
            identity.update(model=self.model, gguf_file=self.gguf_file)
        identity["revision"] = self.revision
        if self.tokenizer:
            identity["tokenizer"] = self.tokenizer
        identity["device"] = device_type
        if self.engine != "generate":  # `generate` answers keep the keys they had before the engine setting existed
            identity["engine"] = CONTINUOUS_ENGINE_VERSION
        identity["params"] = params
        return identity

    def _sources(self) -> tuple[str, Optional[str], str, Optional[str]]:
        """(model source, gguf file, tokenizer source, tokenizer gguf file), assembling the embedded file if needed."""
        artifact = self._artifact()
        if artifact is not None:
            from sctc_assets.lib.embedded_model import ensure_artifact

            # Verified against artifact.sha256. Resolved, so data folders that link to one models folder (the
            # tests' isolated data folders) share one loaded model.
            path = ensure_artifact(artifact).resolve()
            source, gguf_file = str(path.parent), path.name
        elif self.model:
            source, gguf_file = _split_source(self.model, self.gguf_file)
        else:
            raise BackendUnavailable("the transformers backend needs `model` (hub id, folder or .gguf) or `embedded`")
        if self.tokenizer:
            tokenizer_source, tokenizer_gguf = _split_source(self.tokenizer, None)
        else:
            tokenizer_source, tokenizer_gguf = source, gguf_file
        return source, gguf_file, tokenizer_source, tokenizer_gguf

    def local_tokenizer_file(self) -> Optional[Path]:
        """This model's tokenizer as a `tokenizer.json` already on this machine, found without loading or converting
        anything (for `sctc plan`'s token counts): the embedded model's de-quantized weights folder or its converted
        GGUF vocabulary (`sctc fetch` or a first run makes either), a local model folder's own file, or a local GGUF
        file's converted vocabulary. None when there is none (a hub model, nothing converted yet)."""
        from sctc_assets.lib.name.tokenization import converted_gguf_vocabulary, default_files_dir, legacy_files_dir

        artifact = self._artifact()
        if self.tokenizer:
            candidates = [Path(self.tokenizer).expanduser() / "tokenizer.json"]
        elif artifact is not None:
            from sctc_assets.backends import gguf_cache
            from sctc_assets.lib.embedded_model import verified_artifact

            dtype = resolved_precision(self.device, self.dtype)[1]
            folder = gguf_cache.cached_folder(artifact.sha256, artifact.hub_filename, dtype)
            gguf = verified_artifact(artifact)
            candidates = ([folder / "tokenizer.json"] if folder else []) + ([converted_gguf_vocabulary(
                gguf, default_files_dir(), sha256=artifact.sha256, earlier=[legacy_files_dir()])] if gguf else [])
        elif self.model:
            source = Path(self.model).expanduser()
            if source.is_file() and source.suffix == ".gguf":
                candidates = [converted_gguf_vocabulary(source, default_files_dir(), earlier=[legacy_files_dir()])]
            elif self.gguf_file and Path(source, self.gguf_file).is_file():
                candidates = [converted_gguf_vocabulary(Path(source, self.gguf_file), default_files_dir(),
                                                        earlier=[legacy_files_dir()])]
            else:
                candidates = [source / "tokenizer.json"]
        else:
            candidates = []
        return next((path for path in candidates if path is not None and path.is_file()), None)

    def token_counter(self) -> Optional[TokenCounter]:
        """The model's `tokenizer.json` when it is on this machine (`local_tokenizer_file`), with the chat template
        beside it where there is one; None (the characters rule) when it is not: a plan never converts or
        downloads."""
        path = self.local_tokenizer_file()
        if path is None:
            return None
        try:
            render = self.offline_prompt(path)
        except Exception:  # a template Jinja2 cannot compile: the chat format's flat rate instead
            render = None
        name = f"{self.embedded or self.tokenizer or self.model}'s tokenizer.json"
        return json_counter(str(path), name + (" and chat template" if render is not None else ""), render)

    def offline_prompt(self, tokenizer_file: Path) -> Optional[Callable[[Sequence[Mapping[str, str]]], str]]:
        """messages → the prompt text `render_prompt` would give, without transformers: the chat template kept beside
        `tokenizer_file` (`chat_template.jinja`, or `tokenizer_config.json`'s), rendered with Jinja2 the way
        transformers renders it; the user messages joined without `use_chat_template`. None when the template is not
        on the machine."""
        if not self.use_chat_template:
            return lambda messages: "\n\n".join(m.get("content", "") for m in messages if m.get("role") == "user")
        folder = tokenizer_file.parent
        config: dict[str, Any] = {}
        try:
            config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            pass
        try:
            text = (folder / "chat_template.jinja").read_text(encoding="utf-8")
        except OSError:
            text = config.get("chat_template")
        if not isinstance(text, str):
            return None
        from jinja2.exceptions import TemplateError
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        def raise_exception(message: str) -> None:
            raise TemplateError(message)

        environment = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                                    extensions=["jinja2.ext.loopcontrols"])
        environment.globals["raise_exception"] = raise_exception
        environment.filters["tojson"] = lambda value, indent=None: json.dumps(value, ensure_ascii=False,
                                                                             indent=indent)
        template = environment.from_string(text)
        special = {name: config[name] for name in ("bos_token", "eos_token") if isinstance(config.get(name), str)}
        return lambda messages: template.render(messages=self._with_system(messages), add_generation_prompt=True,
                                                **special)

    def _gguf_sha256(self, source: str, gguf_file: Optional[str]) -> Optional[str]:
        """The sha256 that keys the converted-weights cache: the embedded file's verified hash, else hashed here."""
        if not (self.cache_converted_weights and gguf_file and Path(source, gguf_file).is_file()):
            return None
        artifact = self._artifact()
        if artifact is not None:
            return artifact.sha256
        from sctc_assets.lib.embedded_model import sha256_file

        return sha256_file(Path(source, gguf_file))

    def converted_weights_download(self, what: str):
        """The de-quantized weights of this model's embedded GGUF as a `lib.fetching.Download`, so that `sctc fetch`
        converts them into the machine's weights cache ahead of a run; None when a run converts nothing (a hub
        model or folder, a GGUF given by path, or `cache_converted_weights: false`)."""
        from sctc_assets.backends import gguf_cache
        from sctc_assets.lib.fetching import Download

        artifact = self._artifact()
        if artifact is None or not self.cache_converted_weights or self.tokenizer:
            return None
        dtype = resolved_precision(self.device, self.dtype)[1]

        def present() -> Optional[Path]:
            return gguf_cache.cached_folder(artifact.sha256, artifact.hub_filename, dtype)

        def fetch() -> Path:
            self._loaded()  # converts and keeps the weights (load_model), or loads a folder another process kept
            clear_model_cache()
            return present() or gguf_cache.default_weights_dir()

        return Download(key=f"weights {artifact.name} {dtype}", present=present, fetch=fetch,
                        what=f"{what}: the embedded model {artifact.name} de-quantized to {dtype} (about 40 CPU-s)")

    def _loaded(self) -> LoadedModel:
        if self.temperature < 0:
            raise BackendUnavailable(f"temperature must be >= 0, got {self.temperature}")
        if self.batch_size < 1 or self.max_new_tokens < 1:
            raise BackendUnavailable("batch_size and max_new_tokens must be positive")
        if self.engine not in ENGINES:
            raise BackendUnavailable(f"unknown engine {self.engine!r}: use one of {', '.join(ENGINES)}")
        source, gguf_file, tokenizer_source, tokenizer_gguf = self._sources()
        key = (source, gguf_file, self.revision, tokenizer_source, tokenizer_gguf, self.device, self.dtype,
               self.trust_remote_code)
        with _MODELS_LOCK:
            loaded = _MODELS.get(key)
            if loaded is None:
                loaded = load_model(*key, gguf_sha256=self._gguf_sha256(source, gguf_file))
                _MODELS[key] = loaded
        return loaded

    # --- generation ----------------------------------------------------------------------------------------------

    def _messages(self, request: GenerationRequest) -> list[dict[str, str]]:
        return self._with_system(request.messages)

    def _with_system(self, chat: Sequence[Mapping[str, str]]) -> list[dict[str, str]]:
        messages = [dict(message) for message in chat]
        if self.system_prompt and not any(message.get("role") == "system" for message in messages):
            messages.insert(0, {"role": "system", "content": self.system_prompt})
        return messages

    def render_prompt(self, tokenizer: Any, request: GenerationRequest) -> tuple[str, bool]:
        """The prompt text, and whether it came from the chat template (then it already holds special tokens)."""
        messages = self._messages(request)
        if self.use_chat_template and getattr(tokenizer, "chat_template", None):
            text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
            return text, True
        return "\n\n".join(m.get("content", "") for m in messages if m.get("role") == "user"), False

    def _encode(self, tokenizer: Any, request: GenerationRequest) -> list[int]:
        text, templated = self.render_prompt(tokenizer, request)
        return list(tokenizer(text, add_special_tokens=not templated)["input_ids"])

    def _generation_kwargs(self, loaded: LoadedModel) -> dict[str, Any]:
        # Explicit values for everything that shapes decoding, so the model's own generation_config.json (for
        # instance a repetition penalty or top_k) cannot silently change answers, and greedy decoding passes no
        # sampling-only flag (which would log warnings).
        kwargs: dict[str, Any] = {
            "max_new_tokens": self.max_new_tokens,
            "do_sample": self.temperature > 0,
            "num_beams": 1,
            "repetition_penalty": 1.0,
            "pad_token_id": loaded.pad_token_id,
            "eos_token_id": list(loaded.eos_token_ids) or None,
        }
        if self.temperature > 0:
            kwargs.update(temperature=self.temperature, top_p=self.top_p if self.top_p is not None else 1.0, top_k=0)
        return kwargs

    def _batch_seed(self, requests: Sequence[GenerationRequest]) -> int:
        """A seed that depends only on the configured seed and the batch's content (not on its position)."""
        digest = hashlib.sha256(str(self.seed).encode("utf-8"))
        for request in requests:
            payload = [[dict(message) for message in request.messages], request.trial]
            digest.update(json.dumps(payload, sort_keys=True, ensure_ascii=False).encode("utf-8"))
        return int.from_bytes(digest.digest()[:8], "big") & 0x7FFF_FFFF_FFFF_FFFF

    def _generate_batch(
        self, loaded: LoadedModel, prompts: Sequence[list[int]], seed: int
    ) -> list[GenerationResult]:
        import torch

        width = max(len(ids) for ids in prompts)
        input_ids = torch.full((len(prompts), width), loaded.pad_token_id, dtype=torch.long)
        attention_mask = torch.zeros((len(prompts), width), dtype=torch.long)
        for row, ids in enumerate(prompts):
            input_ids[row, width - len(ids) :] = torch.tensor(ids, dtype=torch.long)
            attention_mask[row, width - len(ids) :] = 1
        torch.manual_seed(seed)
        started = time.monotonic()
        with torch.inference_mode():
            output = loaded.model.generate(
                input_ids=input_ids.to(loaded.input_device),
                attention_mask=attention_mask.to(loaded.input_device),
                **self._generation_kwargs(loaded),
            )
        latency = (time.monotonic() - started) / len(prompts)
        new_tokens = output[:, width:].tolist()
        eos = set(loaded.eos_token_ids)
        results = []
        for ids, tokens in zip(prompts, new_tokens):
            end = next((position for position, token in enumerate(tokens) if token in eos), None)
            used = tokens if end is None else tokens[: end + 1]
            finish = "length" if end is None and len(used) >= self.max_new_tokens else "stop"
            text = loaded.tokenizer.decode(used, skip_special_tokens=True)
            results.append(
                GenerationResult(
                    text=text,
                    outcome="ok",
                    input_tokens=len(ids),
                    output_tokens=len(used),
                    finish_reason=finish,
                    latency_s=latency,
                    seed=seed,  # the torch seed of this batch: what the `seed` column records
                )
            )
        return results

    def _run_batch(
        self,
        loaded: LoadedModel,
        batch: list[int],
        encoded: list[list[int]],
        requests: Sequence[GenerationRequest],
        on_result: ResultCallback,
    ) -> None:
        import torch

        try:
            results = self._generate_batch(
                loaded, [encoded[i] for i in batch], self._batch_seed([requests[i] for i in batch])
            )
        except torch.cuda.OutOfMemoryError as exc:
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
            if len(batch) > 1:
                half = len(batch) // 2
                self._run_batch(loaded, batch[:half], encoded, requests, on_result)
                self._run_batch(loaded, batch[half:], encoded, requests, on_result)
                return
            on_result(batch[0], GenerationResult(None, "error", message=f"out of memory: {exc}"))
            return
        for index, result in zip(batch, results):
            on_result(index, result)

    def _halted(self) -> bool:
        """Whether a stop was requested (Ctrl-C, budget): `ModelBackend.halt_reason`, where the base class has it."""
        halt_reason = getattr(self, "halt_reason", None)
        return bool(halt_reason()) if callable(halt_reason) else False

    def _request_seed(self, request: GenerationRequest) -> int:
        return self._batch_seed([request])

    def _next_tokens(self, requests: Sequence[GenerationRequest], device: Any):
        """The continuous engine's token choice: argmax, or a sample from each request's own seeded generator."""
        import torch

        if self.temperature <= 0:
            return lambda logits, rows: logits.argmax(dim=-1)
        generators: dict[int, Any] = {}
        top_p = self.top_p if self.top_p is not None else 1.0

        def sample(logits, rows):
            chosen = []
            for row, index in enumerate(rows):
                if index not in generators:
                    generators[index] = torch.Generator(device=logits.device)
                    generators[index].manual_seed(self._request_seed(requests[index]))
                scores = logits[row].float() / self.temperature
                if top_p < 1.0:  # as transformers' TopPLogitsWarper: drop the least likely tokens outside top_p
                    ordered, order = torch.sort(scores)
                    outside = ordered.softmax(dim=-1).cumsum(dim=-1) <= 1 - top_p
                    outside[-1] = False
                    scores = scores.masked_fill(outside.scatter(0, order, outside), float("-inf"))
                chosen.append(torch.multinomial(scores.softmax(dim=-1), 1, generator=generators[index]))
            return torch.cat(chosen)

        return sample

    def _run_continuous(self, loaded: LoadedModel, encoded: list[list[int]], runnable: list[int],
                        requests: Sequence[GenerationRequest], on_result: ResultCallback) -> None:
        import torch

        from sctc_assets.backends.continuous_batching import ContinuousBatcher

        batch_size = self.batch_size
        todo = list(runnable)
        while todo:
            batcher = ContinuousBatcher(
                loaded.model, batch_size=batch_size, max_new_tokens=self.max_new_tokens,
                eos_token_ids=loaded.eos_token_ids, device=loaded.input_device,
                next_tokens=self._next_tokens([requests[i] for i in todo], loaded.input_device))
            answered: set[int] = set()

            def finished(position: int, tokens: list[int], reason: str, seconds: float) -> None:
                index = todo[position]
                answered.add(index)
                on_result(index, GenerationResult(
                    text=loaded.tokenizer.decode(tokens, skip_special_tokens=True), outcome="ok",
                    input_tokens=len(encoded[index]), output_tokens=len(tokens), finish_reason=reason,
                    latency_s=seconds,
                    # each sampled answer has its own generator: its seed is what the `seed` column records
                    seed=self._request_seed(requests[index]) if self.temperature > 0 else None))

            try:
                batcher.run([encoded[i] for i in todo], finished, should_stop=self._halted)
                return  # prompts never started (a halt) stay unanswered; `generate` reports them
            except torch.cuda.OutOfMemoryError as exc:
                torch.cuda.empty_cache()
                todo = [index for index in todo if index not in answered]
                if batch_size == 1:
                    for index in todo:
                        on_result(index, GenerationResult(None, "error", message=f"out of memory: {exc}"))
                    return
                batch_size = max(1, batch_size // 2)

    def claim_chunk_size(self) -> int:
        # Each chunk is one engine run, whose batch is part-empty while it fills and drains: many batches long, so
        # that costs little (a term partition of the main job is 330 prompts, one chunk).
        return max(1024, 16 * self.batch_size)

    def _generate_uncached(self, requests: Sequence[GenerationRequest], on_result: ResultCallback) -> None:
        if not requests:
            return
        loaded = self._loaded()
        encoded = [self._encode(loaded.tokenizer, request) for request in requests]
        runnable = []
        for index, ids in enumerate(encoded):
            if ids:
                runnable.append(index)
            else:
                on_result(index, GenerationResult(None, "error", message="the prompt encodes to no tokens"))
        if self.engine == "continuous":
            from sctc_assets.backends.continuous_batching import supports

            if supports(loaded.model):
                self._run_continuous(loaded, encoded, runnable, requests, on_result)
                return
            raise BackendUnavailable(
                f"the continuous engine cannot run {type(loaded.model).__name__} (it needs sdpa or eager attention"
                " and a full-attention cache); set `engine: generate` for this model")
        # Longest first: similar lengths share a batch (little padding) and an out-of-memory shows up at once.
        order = sorted(runnable, key=lambda index: (-len(encoded[index]), index))
        for start in range(0, len(order), self.batch_size):
            if self._halted():
                return  # the unanswered rest is reported by `generate`
            self._run_batch(loaded, order[start : start + self.batch_size], encoded, requests, on_result)

    # --- log-probabilities ---------------------------------------------------------------------------------------

    def scoring_identity(self) -> dict[str, Any]:
        # Log-probabilities depend on the weights, the tokenizer and the precision, not on decoding settings.
        identity = self.identity()
        return {**identity, "params": {"dtype": identity["params"]["dtype"]}}

    def _scoring_inputs(self, tokenizer: Any, prompt: str, continuation: str) -> tuple[list[int], int]:
        """Token ids of prompt+continuation and the index of the first continuation token."""
        full = list(tokenizer(prompt + continuation)["input_ids"])
        prefix = list(tokenizer(prompt)["input_ids"])
        start = 0
        while start < min(len(prefix), len(full)) and prefix[start] == full[start]:
            start += 1
        if start == 0:
            # No context token to condition the first continuation token on: use BOS when the tokenizer has one.
            bos = tokenizer.bos_token_id
            if bos is not None:
                full, start = [bos, *full], 1
            else:
                start = 1
        return full, start

    def score_continuations(self, prompts: Sequence[str], continuations: Sequence[str]) -> list[float]:
        if len(prompts) != len(continuations):
            raise ValueError(f"{len(prompts)} prompts but {len(continuations)} continuations")
        if not prompts:
            return []
        import torch

        loaded = self._loaded()
        items = [self._scoring_inputs(loaded.tokenizer, p, c) if c else None for p, c in zip(prompts, continuations)]
        scores = [0.0] * len(items)
        order = sorted(
            (index for index, item in enumerate(items) if item is not None and item[1] < len(item[0])),
            key=lambda index: (-len(items[index][0]), index),
        )
        for start in range(0, len(order), self.batch_size):
            batch = order[start : start + self.batch_size]
            width = max(len(items[index][0]) for index in batch)
            input_ids = torch.full((len(batch), width), loaded.pad_token_id, dtype=torch.long)
            attention_mask = torch.zeros((len(batch), width), dtype=torch.long)
            for row, index in enumerate(batch):
                ids = items[index][0]
                input_ids[row, : len(ids)] = torch.tensor(ids, dtype=torch.long)
                attention_mask[row, : len(ids)] = 1
            with torch.inference_mode():
                logits = loaded.model(
                    input_ids=input_ids.to(loaded.input_device),
                    attention_mask=attention_mask.to(loaded.input_device),
                    use_cache=False,
                ).logits
                for row, index in enumerate(batch):
                    ids, first = items[index]
                    log_probs = torch.log_softmax(logits[row, first - 1 : len(ids) - 1].float(), dim=-1)
                    targets = torch.tensor(ids[first:], dtype=torch.long, device=log_probs.device)
                    scores[index] = float(log_probs.gather(-1, targets[:, None]).sum())
        return scores
