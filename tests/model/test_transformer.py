import pytest
import torch
from torch import nn

from aiayn.cpu import prepare_for_cpu
from aiayn.cpu.prepared_weight import packs
from aiayn.model import DecoderLayer, EncoderLayer, ModelConfig, build_model, count_parameters, padding_mask
from tests.model_helpers import PAD, random_batch, small_model, step_by_step_logprobs


def copy_mha(ours, theirs):
    theirs.in_proj_weight.data.copy_(ours.in_proj.weight)
    theirs.in_proj_bias.data.copy_(ours.in_proj.bias)
    theirs.out_proj.weight.data.copy_(ours.out_proj.weight)
    theirs.out_proj.bias.data.copy_(ours.out_proj.bias)


def copy_common(ours, theirs, norms):
    theirs.linear1.load_state_dict(ours.ffn.w_1.state_dict())
    theirs.linear2.load_state_dict(ours.ffn.w_2.state_dict())
    for our_norm, their_norm in norms:
        their_norm.load_state_dict(our_norm.state_dict())


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_layer_equals_torch(norm_first):
    ours = EncoderLayer(d_model=16, n_heads=4, d_ff=32, dropout=0.1, norm_first=norm_first).eval()
    theirs = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.1, batch_first=True, norm_first=norm_first).eval()
    for p in ours.parameters():  # non-default LayerNorm parameters so a swapped norm would show
        p.data.add_(0.01 * torch.randn_like(p))
    copy_mha(ours.self_attn, theirs.self_attn)
    copy_common(ours, theirs, [(ours.self_attn_norm, theirs.norm1), (ours.ffn_norm, theirs.norm2)])
    x = torch.randn(2, 5, 16)
    tokens = torch.tensor([[4, 4, 4, 0, 0], [4, 4, 4, 4, 4]])
    out, _ = ours(x, padding_mask(tokens, 0))
    with torch.no_grad():  # the slow path, so torch's fast path cannot zero padded rows differently
        ref = theirs(x, src_key_padding_mask=tokens == 0)
    torch.testing.assert_close(out[0, :3], ref[0, :3], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out[1], ref[1], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_layer_equals_torch(norm_first):
    ours = DecoderLayer(d_model=16, n_heads=4, d_ff=32, dropout=0.1, norm_first=norm_first).eval()
    for p in ours.parameters():
        p.data.add_(0.01 * torch.randn_like(p))
    theirs = nn.TransformerDecoderLayer(16, 4, 32, dropout=0.1, batch_first=True, norm_first=norm_first).eval()
    copy_mha(ours.self_attn, theirs.self_attn)
    copy_mha(ours.cross_attn, theirs.multihead_attn)
    copy_common(ours, theirs, [(ours.self_attn_norm, theirs.norm1), (ours.cross_attn_norm, theirs.norm2),
                               (ours.ffn_norm, theirs.norm3)])
    x, memory = torch.randn(2, 4, 16), torch.randn(2, 6, 16)
    src = torch.tensor([[4, 4, 4, 4, 0, 0], [4, 4, 4, 4, 4, 4]])
    out, _, _ = ours(x, memory, padding_mask(src, 0))
    ref = theirs(x, memory, tgt_mask=nn.Transformer.generate_square_subsequent_mask(4),
                 memory_key_padding_mask=src == 0, tgt_is_causal=True)
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("norm_first", [False, True])
def test_no_causal_leak(norm_first):
    model = small_model(norm_first=norm_first)
    src, tgt = random_batch()
    changed = tgt.clone()
    changed[:, 4:] = (changed[:, 4:] + 5) % 26 + 3
    with torch.no_grad():
        a, b = model(src, tgt), model(src, changed)
    torch.testing.assert_close(a[:, :4], b[:, :4])
    assert not torch.allclose(a[:, 4:], b[:, 4:])


def test_padding_invariance():
    model = small_model()
    src, tgt = random_batch(batch=2, src_len=5, tgt_len=4)
    padded_src = torch.cat([src, torch.full((2, 3), PAD)], dim=1)
    padded_tgt = torch.cat([tgt, torch.full((2, 2), PAD)], dim=1)
    with torch.no_grad():
        a, b = model(src, tgt), model(padded_src, padded_tgt)
    torch.testing.assert_close(a, b[:, :4], atol=1e-5, rtol=1e-5)
    # a short sentence batched with a longer one gives the same logits as alone
    long_src, _ = random_batch(batch=1, src_len=8, seed=3)
    batch = torch.cat([padded_src[:1], long_src], dim=0)
    with torch.no_grad():
        c = model(batch, tgt[:1].expand(2, -1))
    torch.testing.assert_close(a[:1], c[:1], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("norm_first", [False, True])
def test_cached_decoding_equals_full_forward(norm_first):
    model = small_model(norm_first=norm_first)
    src, tgt = random_batch()
    src[0, -2:] = PAD
    with torch.no_grad():
        full = torch.log_softmax(model(src, tgt), -1)
        steps, _ = step_by_step_logprobs(model, src, tgt)
    torch.testing.assert_close(steps, full, atol=1e-5, rtol=1e-5)


def test_packed_products_equal_the_unpacked_model():
    """At 160 rows every decoder product of a step, and the encoder's, runs through oneDNN's packed
    weights (aiayn/cpu/linear.py); the step-by-step log-probs equal teacher forcing with autograd on,
    where torch's own linear runs."""
    model = prepare_for_cpu(small_model())
    src, tgt = random_batch(batch=160)
    full = torch.log_softmax(model(src, tgt), -1).detach()
    with torch.no_grad():
        steps, _ = step_by_step_logprobs(model, src, tgt)
    torch.testing.assert_close(steps, full, atol=1e-5, rtol=1e-5)
    with torch.no_grad():
        if packs(model.generator.weight):  # oneDNN is present: the packed path did run
            assert all(p._prepared is not None for layer in model.decoder_layers
                       for p in (layer.ffn.w_1._packed, layer.cross_attn.in_proj._packed_blocks[0, 1]))


@pytest.mark.parametrize("batch", [3, 160])
@pytest.mark.parametrize("norm_first", [False, True])
def test_cached_decoding_without_packing_equals_full_forward(batch, norm_first, monkeypatch):
    """The other CPUs' path (no AVX-512: products by W^T stored contiguous, aiayn/cpu/linear.py) gives
    the step-by-step log-probs of teacher forcing with autograd on, where torch's own linear runs."""
    monkeypatch.setattr("aiayn.cpu.linear.packing_pays", lambda: False)
    model = prepare_for_cpu(small_model(norm_first=norm_first))
    src, tgt = random_batch(batch=batch)
    full = torch.log_softmax(model(src, tgt), -1).detach()
    with torch.no_grad():
        steps, _ = step_by_step_logprobs(model, src, tgt)
        if packs(model.generator.weight):  # a float32 CPU weight: the transposed form was made and used
            w_1 = model.decoder_layers[0].ffn.w_1
            assert w_1._packed._prepared.shape == w_1.weight.t().shape
    torch.testing.assert_close(steps, full, atol=1e-5, rtol=1e-5)


def test_step_attention_equals_full_attention():
    model = small_model()
    src, tgt = random_batch()
    with torch.no_grad():
        _, maps = model(src, tgt, return_attention=True)
        _, steps = step_by_step_logprobs(model, src, tgt, return_attention=True)
    cross = torch.cat([s["cross"] for s in steps], dim=3)
    torch.testing.assert_close(cross, maps["cross"], atol=1e-5, rtol=1e-5)
    last_self = steps[-1]["decoder_self"]  # (B, L, H, 1, T)
    torch.testing.assert_close(last_self[:, :, :, 0], maps["decoder_self"][:, :, :, -1], atol=1e-5, rtol=1e-5)


def test_select_keeps_the_right_rows_and_sentences():
    """Beam search's use of the state: one row per sentence, then 2 rows per sentence, then a sentence
    leaves and rows are permuted within the others. The reference: a state with one sentence per row,
    where every tensor is selected by row."""
    model = small_model()
    src, tgt = random_batch(batch=3)
    per_row = src.repeat_interleave(2, dim=0)  # the reference: 6 "sentences", one row each
    tokens = torch.stack([tgt[:, 1], tgt[:, 2]], dim=1).flatten()  # (6,) a different token per row
    with torch.no_grad():
        grouped = model.init_state(model.encode(src)[0], src)
        _, grouped, _ = model.decode_step(tgt[:, 0], grouped)
        grouped = grouped.select(torch.tensor([0, 0, 1, 1, 2, 2]))  # 2 rows per sentence
        reference = model.init_state(model.encode(per_row)[0], per_row)
        _, reference, _ = model.decode_step(tgt[:, 0].repeat_interleave(2), reference)
        out_grouped, grouped, _ = model.decode_step(tokens, grouped)
        out_reference, reference, _ = model.decode_step(tokens, reference)
        torch.testing.assert_close(out_grouped, out_reference)
        rows = torch.tensor([1, 0, 5, 5])  # sentence 1 leaves; rows swapped in sentence 0, repeated in 2
        grouped = grouped.select(rows, torch.tensor([0, 2]))
        reference = reference.select(rows, rows)
        next_tokens = tgt[[0, 0, 2, 2], 3]
        out_grouped, _, _ = model.decode_step(next_tokens, grouped)
        out_reference, _, _ = model.decode_step(next_tokens, reference)
    torch.testing.assert_close(out_grouped, out_reference)


def test_attention_maps_shapes_and_rows_sum_to_one():
    model = small_model()
    src, tgt = random_batch()
    src[1, -3:] = PAD
    with torch.no_grad():
        _, maps = model(src, tgt, return_attention=True)
    assert maps["encoder_self"].shape == (3, 2, 4, 7, 7)
    assert maps["decoder_self"].shape == (3, 2, 4, 6, 6)
    assert maps["cross"].shape == (3, 2, 4, 6, 7)
    for m in maps.values():
        torch.testing.assert_close(m.sum(-1), torch.ones(m.shape[:-1]))
    assert torch.all(maps["cross"][1, ..., -3:] == 0)
    assert torch.all(maps["decoder_self"].triu(1) == 0)


def test_paper_base_has_about_65m_parameters():
    model = build_model(ModelConfig.preset("paper-base", share_embeddings=True))
    n = count_parameters(model)
    print(f"paper-base, shared 37000 vocabulary: {n:,} parameters")
    assert 60e6 < n < 66e6
    big = ModelConfig.preset("paper-big")
    assert (big.d_model, big.d_ff, big.n_heads, big.dropout) == (1024, 4096, 16, 0.3)


def test_three_way_tying():
    model = small_model(share_embeddings=True, src_vocab_size=29)
    assert model.src_embed.weight is model.tgt_embed.weight is model.generator.weight
    with pytest.raises(ValueError, match="joint vocabulary"):
        ModelConfig.preset("tiny", share_embeddings=True, src_vocab_size=3, tgt_vocab_size=4)


def test_bad_config_values_are_clear_errors():
    with pytest.raises(ValueError, match="divisible"):
        ModelConfig.preset("tiny", n_heads=3)
    with pytest.raises(ValueError, match="unknown model preset"):
        ModelConfig.preset("nope")
    with pytest.raises(ValueError, match="score"):
        ModelConfig.preset("rnn-luong", score="magic")


def test_prepared_output_projection_matches_linear_and_follows_weight_updates():
    from aiayn.cpu.linear import project
    from aiayn.cpu.prepared_weight import PreparedWeight, prepare

    weight, bias, hidden = torch.randn(50, 16), torch.randn(50), torch.randn(7, 16)
    expected = nn.functional.linear(hidden, weight, bias)
    with torch.no_grad():  # the packed (oneDNN) form where this torch has it, else the transposed one
        torch.testing.assert_close(project(hidden, prepare(weight), bias), expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(project(hidden, prepare(weight), None), hidden @ weight.t(), atol=1e-5, rtol=1e-5)
    cache = PreparedWeight()
    with torch.no_grad():
        first = cache.get(weight)
        assert cache.get(weight) is first  # kept while the weight is unchanged
        weight.mul_(2)  # an optimizer's in-place update
        torch.testing.assert_close(project(hidden, cache.get(weight), None), hidden @ weight.t(), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("batch", [2, 160])  # 160 rows: every product of a step goes through packed weights
def test_decoding_after_a_fused_adam_step_uses_the_new_weights(batch):
    """Fused Adam writes parameters without bumping their version; the prepared output projection (and,
    at many rows, the layers' packed weights) must still follow it once the trainer switches to eval mode
    (it did not: in-training dev BLEU was decoded with the weights of the first validation)."""
    torch.manual_seed(0)
    model = prepare_for_cpu(build_model(ModelConfig.preset("tiny", src_vocab_size=30, tgt_vocab_size=30))).eval()
    src = torch.randint(4, 30, (batch, 5))

    def step_log_probs():
        with torch.no_grad():
            memory, _ = model.encode(src)
            return model.decode_step(torch.full((batch,), 2), model.init_state(memory, src))[0]

    before = step_log_probs()  # prepares (and caches) the generator weight
    model.train()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.1, fused=True)
    model(src, src).sum().backward()
    optimizer.step()
    model.eval()
    after = step_log_probs()
    with torch.enable_grad():  # autograd on: torch's own products, nothing prepared or packed
        memory, _ = model.encode(src)
        logits = model.decode(torch.full((batch, 1), 2), memory, padding_mask(src, model.pad_id))[:, 0]
        expected = torch.log_softmax(logits, dim=-1).detach()
    assert not torch.allclose(before, after)
    torch.testing.assert_close(after, expected, atol=1e-5, rtol=1e-5)
