import torch
import torch.nn.functional as F


class MHA(torch.nn.Module):
    """mamba-ssm's MHA as its callers see it: the constructor's keyword arguments (a name the real
    one lacks fails here too), in_proj (q, k, v) and out_proj, and the training forward: the
    key/value heads repeated, scaled_dot_product_attention. Its mlp_dim, conv and rotary paths are
    not stood in for."""

    def __init__(self, embed_dim, num_heads, num_heads_kv=None, head_dim=None, mlp_dim=0, qkv_proj_bias=True,
                 out_proj_bias=True, softmax_scale=None, causal=False, layer_idx=None, d_conv=0, rotary_emb_dim=0,
                 rotary_emb_base=10000.0, rotary_emb_interleaved=False, device=None, dtype=None):
        super().__init__()
        assert mlp_dim == 0 and d_conv == 0 and rotary_emb_dim == 0, "not in the stand-in"
        self.num_heads = num_heads
        self.num_heads_kv = num_heads_kv if num_heads_kv is not None else num_heads
        self.head_dim = head_dim if head_dim is not None else embed_dim // num_heads
        self.causal, self.softmax_scale, self.rotary_emb_dim = causal, softmax_scale, rotary_emb_dim
        qkv_dim = self.head_dim * (self.num_heads + 2 * self.num_heads_kv)
        self.in_proj = torch.nn.Linear(embed_dim, qkv_dim, bias=qkv_proj_bias, device=device, dtype=dtype)
        self.out_proj = torch.nn.Linear(self.head_dim * num_heads, embed_dim, bias=out_proj_bias, device=device,
                                        dtype=dtype)

    def forward(self, x, inference_params=None):
        b, s, _ = x.shape
        q, k, v = self.in_proj(x).split([self.num_heads * self.head_dim, self.num_heads_kv * self.head_dim,
                                         self.num_heads_kv * self.head_dim], dim=-1)
        q = q.view(b, s, self.num_heads, self.head_dim).transpose(1, 2)
        k, v = (t.view(b, s, self.num_heads_kv, self.head_dim).transpose(1, 2)
                .repeat_interleave(self.num_heads // self.num_heads_kv, dim=1) for t in (k, v))
        context = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal, scale=self.softmax_scale)
        return self.out_proj(context.transpose(1, 2).reshape(b, s, -1))
