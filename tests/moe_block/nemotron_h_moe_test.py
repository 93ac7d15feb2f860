"""The MoE block with Nemotron-H's options against transformers' NemotronHMoE on the same weights
(fp32, CPU): sigmoid routing with a nonzero e_score_correction_bias, group-limited top-k,
norm_topk_prob and routed_scaling_factor, squared-ReLU experts and the ungated shared expert.
Each case builds the module in transformers, writes its weights under Hugging Face's checkpoint
names (one tensor per expert), runs nemotron_h_moe_check on them, and compares the output and the
gradients of the input and of every weight, within 1e-5.
    nemotron_h_moe_test.py CHECK_BINARY WORK_DIR
"""
import json
import os
import subprocess
import sys

import torch
from safetensors.torch import load_file, save_file
from transformers import NemotronHConfig
from transformers.models.nemotron_h.modeling_nemotron_h import NemotronHMoE

TOLERANCE = 1e-5
CASES = {
    # 4 groups of 2 experts, the best 2 groups, top-3 renormalised and scaled.
    "grouped": dict(n_routed_experts=8, num_experts_per_tok=3, n_group=4, topk_group=2, norm_topk_prob=True,
                    routed_scaling_factor=2.5),
    # No group limit, the raw sigmoid scores as gates.
    "plain": dict(n_routed_experts=6, num_experts_per_tok=2, n_group=1, topk_group=1, norm_topk_prob=False,
                  routed_scaling_factor=1.0),
}
# triax's parameter names (moe_block.hpp) -> NemotronHMoE's.
HF_PARAMETER = {
    "gate.weight": "gate.weight",
    "experts.up_proj": "experts.up_proj",
    "experts.down_proj": "experts.down_proj",
    "shared_expert.up_proj.weight": "shared_experts.up_proj.weight",
    "shared_expert.down_proj.weight": "shared_experts.down_proj.weight",
}


def build(case, seed):
    config = NemotronHConfig(hidden_size=16, moe_intermediate_size=12, moe_shared_expert_intermediate_size=20,
                             mlp_hidden_act="relu2", **case)
    torch.manual_seed(seed)
    module = NemotronHMoE(config)
    with torch.no_grad():
        for p in module.parameters():
            p.normal_(0.0, 0.3)
        # Large enough to change which experts win for some tokens.
        module.gate.e_score_correction_bias.normal_(0.0, 0.2)
    return config, module


def hf_checkpoint(module):
    """The module's weights under the names of a Nemotron-H checkpoint: one tensor per expert."""
    tensors = {}
    for name, value in module.state_dict().items():
        if name.startswith("experts."):
            for j in range(value.shape[0]):
                tensors[f"experts.{j}.{name.split('.')[1]}.weight"] = value[j].contiguous()
        else:
            tensors[name] = value.contiguous()
    return tensors


def run_case(binary, work, name, case, seed):
    folder = os.path.join(work, name)
    os.makedirs(os.path.join(folder, "hf"), exist_ok=True)
    config, module = build(case, seed)
    save_file(hf_checkpoint(module), os.path.join(folder, "hf", "model.safetensors"))
    x = torch.randn(2, 7, 16)
    loss_weights = torch.randn(2, 7, 16)
    metadata = {"hidden_size": "16", "num_experts": str(config.n_routed_experts),
                "top_k": str(config.num_experts_per_tok), "expert_intermediate_size": "12", "score": "sigmoid",
                "n_group": str(config.n_group), "topk_group": str(config.topk_group),
                "norm_topk_prob": "true" if config.norm_topk_prob else "false",
                "routed_scaling_factor": repr(float(config.routed_scaling_factor)), "activation": "relu2",
                "shared_expert_intermediate_size": "20"}
    save_file({"x": x, "loss_weights": loss_weights}, os.path.join(folder, "inputs.safetensors"), metadata=metadata)

    x_hf = x.clone().requires_grad_(True)
    out = module(x_hf)
    (out * loss_weights).sum().backward()
    subprocess.run([binary, folder], check=True)
    triax = load_file(os.path.join(folder, "triax.safetensors"))

    expected = {"out": out.detach(), "x_grad": x_hf.grad}
    parameters = dict(module.named_parameters())
    for triax_name, hf_name in HF_PARAMETER.items():
        expected["grad." + triax_name] = parameters[hf_name].grad
    failures = []
    for key, want in expected.items():
        got = triax[key]
        difference = (got - want).abs().max().item()
        print(f"{name}: {key} max |triax - transformers| = {difference:.3g}")
        if got.shape != want.shape or not difference <= TOLERANCE:
            failures.append(key)
    if "grad.gate.e_score_correction.bias" in triax:
        failures.append("the correction bias took a gradient")
    return failures


def main():
    binary, work = sys.argv[1], sys.argv[2]
    failures = []
    for seed, (name, case) in enumerate(CASES.items()):
        failures += [f"{name}: {f}" for f in run_case(binary, work, name, case, seed)]
    if failures:
        print("FAILED:", json.dumps(failures))
        return 1
    print("the MoE block equals transformers' NemotronHMoE")
    return 0


if __name__ == "__main__":
    sys.exit(main())
