"""Hugging Face Llama folders between transformers and triax:

- transformers writes tiny random LlamaForCausalLM models (GQA 4 heads / 2 kv heads, rope_theta
  500000; tied and untied; one file and sharded; f32 and bf16; llama3 RoPE scaling with attention
  biases; a transformers 4.x style config.json); triax's read_hf_model (with the llama plugin's
  mapping) returns the same tensors bit for bit (q/k/v and gate/up fused as the plugin holds
  them, rebuilt here independently) and a model_config with the same values, which the llama
  plugin accepts;
- triax's write_hf_model of those tensors gives folders that LlamaForCausalLM.from_pretrained loads
  with no missing, unexpected or mismatched keys, equal weights, equal config fields and equal logits;
- broken folders are refused with messages naming the file and the key or tensor.

  hf_llama_compat.py <interop_tool executable>
"""
import copy
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import torch  # noqa: E402
import yaml  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402
from transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402
from transformers.utils import logging as hf_logging  # noqa: E402

hf_logging.disable_progress_bar()
torch.set_num_threads(1)
TOOL = sys.argv[1]
failures = []


def check(condition, message):
    if not condition:
        failures.append(message)
        print("FAIL:", message)


def tool(*args):
    return subprocess.run([TOOL, *map(str, args)], capture_output=True, text=True)


def bits(tensor):
    return tensor.contiguous().reshape(-1).view(torch.uint8)


def make_model(tied, dtype=torch.float32, attention_bias=False, rope_scaling=None, seed=0):
    config = LlamaConfig(vocab_size=96, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                         rope_theta=500000.0, rms_norm_eps=1e-5, initializer_range=0.05,
                         tie_word_embeddings=tied, attention_bias=attention_bias, rope_scaling=rope_scaling,
                         bos_token_id=5, eos_token_id=6, pad_token_id=0)
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config).eval()
    with torch.no_grad():  # every weight random (norms too), so that any mix-up shows
        for parameter in model.parameters():
            parameter.normal_(0.0, 0.5)
    return model.to(dtype)


def rope_of(config):
    """(rope_theta, scaling without rope_theta, or None for plain RoPE), as transformers 5 holds it."""
    params = dict(config.rope_parameters)
    theta = params.pop("rope_theta")
    params.pop("type", None)
    if params.get("rope_type", "default") == "default":
        return theta, None
    return theta, params


def expected_weights(model):
    state = {name: tensor for name, tensor in model.state_dict().items()}
    if model.config.tie_word_embeddings:
        state.pop("lm_head.weight")
    return state


def triax_layout(state, config):
    """transformers' tensors as the llama plugin's parameters: q/k/v grouped by key/value head
    ([kv_heads, (group + 2) * head_dim, ...]: each kv head's query heads, its key head, its value
    head) and gate/up stacked ([2, intermediate, hidden])."""
    out = dict(state)
    kv = config.num_key_value_heads
    head_dim = config.hidden_size // config.num_attention_heads
    group = config.num_attention_heads // kv
    for i in range(config.num_hidden_layers):
        prefix = f"model.layers.{i}."
        for what in ("weight", "bias"):
            names = [f"{prefix}self_attn.{x}_proj.{what}" for x in "qkv"]
            if names[0] not in out:
                continue
            q, k, v = (out.pop(name) for name in names)
            rest = tuple(q.shape[1:])
            out[f"{prefix}self_attn.qkv_proj.{what}"] = torch.cat(
                [q.reshape(kv, group * head_dim, *rest), k.reshape(kv, head_dim, *rest),
                 v.reshape(kv, head_dim, *rest)], 1)
        out[f"{prefix}mlp.gate_up_proj.weight"] = torch.stack(
            [out.pop(f"{prefix}mlp.gate_proj.weight"), out.pop(f"{prefix}mlp.up_proj.weight")])
    return out


CONFIG_FIELDS = ["hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                 "num_key_value_heads", "vocab_size", "max_position_embeddings", "rms_norm_eps",
                 "tie_word_embeddings", "attention_bias", "initializer_range", "bos_token_id",
                 "eos_token_id", "pad_token_id", "hidden_act", "head_dim", "mlp_bias"]


def check_read(case, folder, model, work):
    """read_hf_model gives the model's tensors and config; returns the files for hf-write."""
    tensors, config_yaml = work / f"{case}.read.safetensors", work / f"{case}.read.yaml"
    result = tool("hf-read", folder, tensors, config_yaml)
    check(result.returncode == 0, f"{case}: hf-read failed: {result.stderr}")
    if result.returncode != 0:
        return None
    dtype = json.loads(result.stdout)["dtype"]
    check(dtype == str(model.dtype).removeprefix("torch."), f"{case}: dtype {dtype} != {model.dtype}")
    read = load_file(tensors)
    expected = triax_layout(expected_weights(model), model.config)
    check(sorted(read) == sorted(expected), f"{case}: tensor names {sorted(set(read) ^ set(expected))} differ")
    for name, tensor in expected.items():
        if name in read:
            check(read[name].dtype == tensor.dtype and torch.equal(bits(read[name]), bits(tensor)),
                  f"{case}: {name} differs")

    model_config = yaml.safe_load(config_yaml.read_text())
    hf = model.config
    for key in CONFIG_FIELDS:
        if key in ("head_dim", "mlp_bias"):
            continue
        check(model_config.get(key) == getattr(hf, key), f"{case}: model_config {key} = {model_config.get(key)}, "
                                                           f"transformers has {getattr(hf, key)}")
    theta, scaling = rope_of(hf)
    check(model_config["rope_theta"] == theta, f"{case}: rope_theta {model_config['rope_theta']} != {theta}")
    check(model_config["rope_scaling"] == scaling, f"{case}: rope_scaling {model_config['rope_scaling']} != {scaling}")
    check(model_config.get("rope_interleaved") is False, f"{case}: rope_interleaved should be false")
    return tensors, config_yaml


def check_write(case, tensors, config_yaml, model, work, dtype, max_shard_bytes, expect_shards):
    """write_hf_model gives a folder transformers loads to the same model."""
    out = work / f"{case}.export"
    result = tool("hf-write", tensors, config_yaml, out, str(dtype).removeprefix("torch."), max_shard_bytes)
    check(result.returncode == 0, f"{case}: hf-write failed: {result.stderr}")
    if result.returncode != 0:
        return
    files = sorted(p.name for p in out.iterdir())
    if expect_shards:
        check("model.safetensors.index.json" in files and "model.safetensors" not in files,
              f"{case}: expected a sharded export, got {files}")
        index = json.loads((out / "model.safetensors.index.json").read_text())
        shards = sorted(set(index["weight_map"].values()))
        check(len(shards) > 1 and all((out / s).exists() for s in shards), f"{case}: shards {shards}")
        check(shards[0] == f"model-00001-of-{len(shards):05d}.safetensors", f"{case}: shard names {shards}")
        total = sum(t.numel() for t in load_file(tensors).values()) * torch.tensor([], dtype=dtype).element_size()
        check(index["metadata"]["total_size"] == total, f"{case}: total_size {index['metadata']}")
    else:
        check(files == ["config.json", "generation_config.json", "model.safetensors"], f"{case}: files {files}")
    check(not any(p.name.startswith(".") for p in work.iterdir()), f"{case}: a temporary folder was left behind")

    loaded, info = LlamaForCausalLM.from_pretrained(out, output_loading_info=True, dtype=dtype)
    loaded.eval()
    for kind in ("missing_keys", "unexpected_keys", "mismatched_keys", "error_msgs"):
        check(not info.get(kind), f"{case}: from_pretrained {kind}: {info.get(kind)}")
    reference = copy.deepcopy(model).to(dtype)
    ours, theirs = loaded.state_dict(), reference.state_dict()
    check(sorted(ours) == sorted(theirs), f"{case}: loaded names differ")
    for name, tensor in theirs.items():
        if name in ours:
            check(ours[name].dtype == dtype and torch.equal(bits(ours[name]), bits(tensor)),
                  f"{case}: loaded {name} differs")
    if model.config.tie_word_embeddings:
        check(loaded.lm_head.weight.data_ptr() == loaded.model.embed_tokens.weight.data_ptr(),
              f"{case}: lm_head is not tied to the embedding after loading")
    for key in CONFIG_FIELDS:
        check(getattr(loaded.config, key) == getattr(model.config, key),
              f"{case}: loaded config {key} = {getattr(loaded.config, key)}, expected {getattr(model.config, key)}")
    check(rope_of(loaded.config) == rope_of(model.config), f"{case}: rope {rope_of(loaded.config)}")
    generation = json.loads((out / "generation_config.json").read_text())
    check(generation == {"bos_token_id": 5, "eos_token_id": 6, "pad_token_id": 0}, f"{case}: {generation}")
    tokens = torch.tensor([[5, 17, 3, 88, 41, 9, 60, 2]])
    with torch.no_grad():
        check(torch.equal(loaded(tokens).logits, reference(tokens).logits), f"{case}: logits differ")


def expect_refused(case, folder, work, parts):
    result = tool("hf-read", folder, work / "refused.safetensors", work / "refused.yaml")
    check(result.returncode == 1, f"{case}: expected a refusal, got status {result.returncode}: {result.stderr}")
    for part in parts:
        check(str(part) in result.stderr, f"{case}: message lacks {part!r}: {result.stderr.strip()}")


def edited_copy(source, target, config_edit=None, weights_edit=None):
    shutil.copytree(source, target)
    if config_edit:
        config = json.loads((target / "config.json").read_text())
        config_edit(config)
        (target / "config.json").write_text(json.dumps(config))
    if weights_edit:
        weights = load_file(target / "model.safetensors")
        weights_edit(weights)
        save_file(weights, target / "model.safetensors", metadata={"format": "pt"})
    return target


with tempfile.TemporaryDirectory() as work:
    work = Path(work)

    untied = make_model(tied=False, seed=1)
    untied.save_pretrained(work / "untied")
    files = check_read("untied", work / "untied", untied, work)
    if files:
        check_write("untied", *files, untied, work, torch.float32, 1 << 30, expect_shards=False)
        check_write("untied_bf16_sharded", *files, untied, work, torch.bfloat16, 6000, expect_shards=True)

    tied = make_model(tied=True, seed=2)
    tied.save_pretrained(work / "tied", max_shard_size="20KB")
    check((work / "tied" / "model.safetensors.index.json").exists(), "tied: transformers did not shard")
    files = check_read("tied", work / "tied", tied, work)
    if files:
        check_write("tied", *files, tied, work, torch.float32, 1 << 30, expect_shards=False)
        check_write("tied_sharded", *files, tied, work, torch.float32, 10000, expect_shards=True)

    llama3 = make_model(tied=False, dtype=torch.bfloat16, attention_bias=True, seed=3,
                        rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                      "high_freq_factor": 4.0, "original_max_position_embeddings": 32})
    llama3.save_pretrained(work / "llama3")
    files = check_read("llama3_bias_bf16", work / "llama3", llama3, work)
    if files:
        check_write("llama3_bias_bf16", *files, llama3, work, torch.bfloat16, 1 << 30, expect_shards=False)

    # transformers 4.x spelling: rope_theta + rope_scaling and torch_dtype; keys LlamaForCausalLM
    # does not read are ignored; rotary inv_freq buffers of old checkpoints too.
    def legacy(config):
        config.pop("rope_parameters")
        config.pop("dtype")
        config.update(rope_theta=500000.0, rope_scaling=None, torch_dtype="float32", _name_or_path="x",
                      some_unknown_key=3)

    def with_inv_freq(weights):
        weights["model.layers.0.self_attn.rotary_emb.inv_freq"] = torch.ones(4)

    edited_copy(work / "untied", work / "legacy", legacy, with_inv_freq)
    check_read("legacy_config", work / "legacy", untied, work)

    # A tied model whose file also holds an lm_head.weight equal to the embedding is accepted.
    def add_tied_head(weights):
        weights["lm_head.weight"] = weights["model.embed_tokens.weight"].clone()

    tied_single = make_model(tied=True, seed=4)
    tied_single.save_pretrained(work / "tied_single")
    edited_copy(work / "tied_single", work / "tied_with_head", weights_edit=add_tied_head)
    check_read("tied_with_equal_head", work / "tied_with_head", tied_single, work)

    # Refusals, each naming the file and the key or tensor.
    base = work / "untied"
    single = base / "model.safetensors"

    def mistral(config):
        config.update(architectures=["MistralForCausalLM"], model_type="mistral")

    folder = edited_copy(base, work / "mistral", mistral)
    expect_refused("mistral", folder, work, [folder / "config.json", "architectures", "MistralForCausalLM"])
    folder = edited_copy(base, work / "mtype", lambda c: c.update(model_type="mistral"))
    expect_refused("model_type", folder, work, [folder / "config.json", "model_type", "mistral"])

    q0 = "model.layers.0.self_attn.q_proj.weight"
    folder = edited_copy(base, work / "f64", weights_edit=lambda w: w.update({q0: w[q0].double()}))
    expect_refused("f64", folder, work, [folder / "model.safetensors", q0, "F64"])
    folder = edited_copy(base, work / "i8", weights_edit=lambda w: w.update({"model.norm.weight": w["model.norm.weight"].to(torch.int8)}))
    expect_refused("i8", folder, work, [folder / "model.safetensors", "model.norm.weight", "I8"])

    up1 = "model.layers.1.mlp.up_proj.weight"
    folder = edited_copy(base, work / "missing", weights_edit=lambda w: w.pop(up1))
    expect_refused("missing tensor", folder, work, [folder / "model.safetensors", up1, "missing"])
    folder = edited_copy(base, work / "no_head", weights_edit=lambda w: w.pop("lm_head.weight"))
    expect_refused("missing lm_head", folder, work, [folder / "model.safetensors", "lm_head.weight", "missing"])

    k0 = "model.layers.0.self_attn.k_proj.weight"
    folder = edited_copy(base, work / "shape", weights_edit=lambda w: w.update({k0: w[k0][:8].clone()}))
    expect_refused("wrong shape", folder, work, [folder / "model.safetensors", k0, "[8, 32]", "[16, 32]"])

    extra = "model.layers.0.self_attn.extra.weight"
    folder = edited_copy(base, work / "extra", weights_edit=lambda w: w.update({extra: torch.ones(2)}))
    expect_refused("unexpected tensor", folder, work, [folder / "model.safetensors", extra, "unexpected"])

    def different_head(weights):
        weights["lm_head.weight"] = weights["model.embed_tokens.weight"] + 1

    folder = edited_copy(work / "tied_single", work / "tied_other_head", weights_edit=different_head)
    expect_refused("tied head differs", folder, work, [folder / "model.safetensors", "lm_head.weight", "differs"])

    folder = work / "pickle"
    folder.mkdir()
    shutil.copy(base / "config.json", folder / "config.json")
    torch.save(untied.state_dict(), folder / "pytorch_model.bin")
    expect_refused("pytorch_model.bin", folder, work, [folder / "pytorch_model.bin", "convert", "safetensors"])

    for key, value, words in [("mlp_bias", True, ["mlp_bias"]), ("hidden_act", "gelu", ["hidden_act", "gelu"]),
                              ("head_dim", 16, ["head_dim", "16"]), ("eos_token_id", [6, 7], ["eos_token_id"]),
                              ("attention_dropout", 0.1, ["attention_dropout"]),
                              ("rope_parameters", {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 2.0},
                               ["rope_parameters.rope_type", "yarn"])]:
        folder = edited_copy(base, work / f"key_{key}", lambda c, k=key, v=value: c.update({k: v}))
        expect_refused(f"config {key}", folder, work, [folder / "config.json", *words])

    # Sharded folders: the index and the shards must agree.
    tied_folder = work / "tied"
    index = json.loads((tied_folder / "model.safetensors.index.json").read_text())
    shard = sorted(set(index["weight_map"].values()))[0]
    folder = work / "lost_shard"
    shutil.copytree(tied_folder, folder)
    (folder / shard).unlink()
    expect_refused("missing shard", folder, work, [folder / "model.safetensors.index.json", shard])
    folder = work / "unlisted"
    shutil.copytree(tied_folder, folder)
    moved = next(name for name, file in index["weight_map"].items() if file == shard)
    edited = dict(index, weight_map={n: f for n, f in index["weight_map"].items() if n != moved})
    (folder / "model.safetensors.index.json").write_text(json.dumps(edited))
    expect_refused("tensor not in index", folder, work, [folder / shard, moved, "not listed"])

if failures:
    print(f"{len(failures)} failed")
    sys.exit(1)
print("Hugging Face Llama folders agree between transformers and triax")
