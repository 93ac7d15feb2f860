import dataclasses
import json
from collections import namedtuple

import torch
import torch.nn.functional as F

from mamba_ssm.modules.mamba2 import Mamba2

CausalLMOutput = namedtuple("CausalLMOutput", ["logits"])


def _init_weights(module, n_layer, initializer_range=0.02, rescale_prenorm_residual=True, n_residuals_per_layer=1):
    """mamba-ssm's initialisation as its callers see it (applied per module); here the embedding's."""
    if isinstance(module, torch.nn.Embedding):
        torch.nn.init.normal_(module.weight, std=initializer_range)


class MambaLMHeadModel(torch.nn.Module):
    """Prints the config it was given (for the tests to check). With Mamba-1 layers it stands in
    for the model with a tied embedding of width 8 over the config's vocabulary; with ssm_cfg's
    layer "Mamba2" it has the real model's parameters (the embedding over the vocabulary padded to
    pad_vocab_size_multiple, a norm and a stand-in Mamba2 per layer, the final norm, the lm_head
    unless tied) around a cheap forward."""

    def __init__(self, config, device=None, dtype=None):
        super().__init__()
        print("stand-in config: " + json.dumps(dataclasses.asdict(config)), flush=True)
        factory = dict(device=device, dtype=dtype)
        ssm_cfg = dict(config.ssm_cfg)
        self.mamba2 = ssm_cfg.pop("layer", "Mamba1") == "Mamba2"
        if not self.mamba2:
            self.embedding = torch.nn.Embedding(config.vocab_size, 8, **factory)
            self.mix = torch.nn.Linear(8, 8, **factory)
            return
        multiple = config.pad_vocab_size_multiple
        vocab = (config.vocab_size + multiple - 1) // multiple * multiple
        self.embedding = torch.nn.Embedding(vocab, config.d_model, **factory)
        self.norms = torch.nn.ParameterList(
            [torch.nn.Parameter(torch.ones(config.d_model, **factory)) for _ in range(config.n_layer)])
        self.mixers = torch.nn.ModuleList(
            [Mamba2(config.d_model, layer_idx=i, **ssm_cfg, **factory) for i in range(config.n_layer)])
        self.norm_f = torch.nn.Parameter(torch.ones(config.d_model, **factory))
        self.lm_head = None if config.tie_embeddings else torch.nn.Linear(config.d_model, vocab, bias=False, **factory)

    def generate(self, input_ids, max_length, top_k=1, cg=False, **kwargs):
        """Greedy (top_k 1) continuation of input_ids up to max_length tokens, as mamba-ssm's
        generate() returns it; prints its arguments (for the tests to check)."""
        print("stand-in generate: " + json.dumps(dict(batch=input_ids.shape[0], prompt=input_ids.shape[1],
                                                      max_length=max_length, top_k=top_k, cg=cg,
                                                      dtype=str(self.embedding.weight.dtype), **kwargs)), flush=True)
        ids = input_ids
        while ids.shape[1] < max_length:
            ids = torch.cat([ids, self.forward(ids).logits[:, -1].argmax(-1, keepdim=True)], 1)
        return ids

    def forward(self, input_ids):
        h = self.embedding(input_ids)
        if not self.mamba2:
            return CausalLMOutput(torch.tanh(self.mix(h)) @ self.embedding.weight.t())
        width = (h.size(-1),)
        for norm, mixer in zip(self.norms, self.mixers):
            h = h + mixer(F.rms_norm(h, width, norm))
        h = F.rms_norm(h, width, self.norm_f)
        return CausalLMOutput(h @ self.embedding.weight.t() if self.lm_head is None else self.lm_head(h))
