"""RNN sequence-to-sequence with attention: the model the Transformer grew out of.

Encoder: bidirectional LSTM or GRU; each direction has d_model/2 units, so encoder states h_i are D wide.
Decoders (both attend over h_1..h_S with any score function of scores.py):
- LuongDecoder (Luong et al. 2015, global attention with input feeding): run the RNN on
  [y_{t-1}; h~_{t-1}] -> h_t, attend with h_t, then h~_t = tanh(W_c [c_t; h_t]), p(y_t) = softmax(W_y h~_t).
- BahdanauDecoder (Bahdanau et al. 2015): attend from s_{t-1}, feed [y_{t-1}; c_t] to the RNN -> s_t,
  readout t_t = tanh(W_o [s_t; c_t; y_{t-1}]), p(y_t) = softmax(W_y t_t).
"""

import torch
from torch import nn

from aiayn.model.decoder_state import RNNState
from aiayn.model.scores import ScoreFunction, attention_distribution, context_vector


class RNNEncoder(nn.Module):
    def __init__(self, *, vocab_size, d_model, pad_id, n_layers=1, dropout=0.1, rnn_type=nn.LSTM):
        super().__init__()
        if d_model % 2:
            raise ValueError(f"RNN d_model must be even (two directions of d_model/2), got {d_model}")
        self.embedding = nn.Embedding(vocab_size, d_model, padding_idx=pad_id)
        self.rnn = rnn_type(d_model, d_model // 2, n_layers, batch_first=True, bidirectional=True,
                            dropout=dropout if n_layers > 1 else 0.0)
        self.pad_id, self.dropout, self.n_layers = pad_id, dropout, n_layers

    def _merge_directions(self, final):
        # (L*2, B, D/2) -> (L, B, D): concatenate the forward and backward final states of each layer
        return final.unflatten(0, (self.n_layers, 2)).transpose(1, 2).flatten(2)

    def forward(self, src):
        """src (B, S) -> outputs (B, S, D), final hidden (L, B, D), final cell (L, B, D) | None."""
        lengths = (src != self.pad_id).sum(1).clamp_min(1).cpu()
        x = nn.functional.dropout(self.embedding(src), self.dropout, self.training)
        packed = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        outputs, final = self.rnn(packed)  # packing keeps padding out of the recurrence
        outputs, _ = nn.utils.rnn.pad_packed_sequence(outputs, batch_first=True, total_length=src.size(1))
        hidden, cell = final if isinstance(final, tuple) else (final, None)
        return outputs, self._merge_directions(hidden), None if cell is None else self._merge_directions(cell)


class _AttentionDecoder(nn.Module):
    """What both decoders share: target embedding, RNN, score function, output layer."""

    def __init__(self, *, vocab_size, d_model, pad_id, score: ScoreFunction, n_layers, dropout, rnn_type,
                 rnn_input_size):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_model, padding_idx=pad_id)
        self.rnn = rnn_type(rnn_input_size, d_model, n_layers, batch_first=True,
                            dropout=dropout if n_layers > 1 else 0.0)
        self.score = score
        self.generator = nn.Linear(d_model, vocab_size)  # W_y, b_y
        self.dropout, self.d_model = dropout, d_model

    def _run_rnn(self, inputs, state: RNNState):
        # inputs (B, I) -> top-layer output (B, D); state.hidden/cell updated
        carry = state.hidden if state.cell is None else (state.hidden, state.cell)
        out, carry = self.rnn(inputs[:, None], carry)
        state.hidden, state.cell = carry if isinstance(carry, tuple) else (carry, None)
        return out[:, 0]

    def _attend(self, query, state: RNNState):
        scores = self.score.score(query, state.prepared_keys)  # e^t: (B, S)
        alpha = attention_distribution(scores, state.src_mask)  # alpha^t = softmax(e^t): (B, S)
        return context_vector(alpha, state.memory), alpha  # c_t = sum_i alpha_i h_i: (B, D)


class LuongDecoder(_AttentionDecoder):
    attention_kind = "luong"  # attends with the new state h_t, then h~_t = tanh(W_c[c_t; h_t]), fed back

    def __init__(self, *, vocab_size, d_model, pad_id, score, n_layers=1, dropout=0.1, rnn_type=nn.LSTM):
        super().__init__(vocab_size=vocab_size, d_model=d_model, pad_id=pad_id, score=score, n_layers=n_layers,
                         dropout=dropout, rnn_type=rnn_type, rnn_input_size=2 * d_model)
        self.W_c = nn.Linear(2 * d_model, d_model)

    def step(self, y_prev, state: RNNState):
        """y_prev (B,) -> output vector h~_t (B, D), attention alpha^t (B, S)."""
        emb = nn.functional.dropout(self.embedding(y_prev), self.dropout, self.training)
        h_t = self._run_rnn(torch.cat([emb, state.input_feed], dim=-1), state)  # input feeding
        c_t, alpha = self._attend(h_t, state)  # Luong: attend with the current state h_t
        h_tilde = torch.tanh(self.W_c(torch.cat([c_t, h_t], dim=-1)))  # h~_t = tanh(W_c[c_t; h_t] + b_c)
        state.input_feed = h_tilde
        return nn.functional.dropout(h_tilde, self.dropout, self.training), alpha


class BahdanauDecoder(_AttentionDecoder):
    attention_kind = "bahdanau"  # attends from s_{t-1}, and c_t enters the RNN

    def __init__(self, *, vocab_size, d_model, pad_id, score, n_layers=1, dropout=0.1, rnn_type=nn.LSTM):
        super().__init__(vocab_size=vocab_size, d_model=d_model, pad_id=pad_id, score=score, n_layers=n_layers,
                         dropout=dropout, rnn_type=rnn_type, rnn_input_size=2 * d_model)
        self.W_o = nn.Linear(3 * d_model, d_model)

    def step(self, y_prev, state: RNNState):
        """y_prev (B,) -> readout t_t (B, D), attention alpha^t (B, S)."""
        emb = nn.functional.dropout(self.embedding(y_prev), self.dropout, self.training)
        c_t, alpha = self._attend(state.hidden[-1], state)  # Bahdanau: attend from s_{t-1}
        s_t = self._run_rnn(torch.cat([emb, c_t], dim=-1), state)  # s_t = RNN(s_{t-1}, [y_{t-1}; c_t])
        readout = torch.tanh(self.W_o(torch.cat([s_t, c_t, emb], dim=-1)))
        return nn.functional.dropout(readout, self.dropout, self.training), alpha


class RNNSeq2Seq(nn.Module):
    """Encoder + attention decoder with the same interface as the Transformer."""

    arch = "rnn"  # a name to show; what the model has is asked of the facts below
    config = None  # the ModelConfig it was built from (aiayn.model.build sets it)
    # one attention, over the encoder states, inside the decoder (Luong: after the RNN step, Bahdanau:
    # before it); no heads, no self-attention
    multi_head = False
    attention_kinds = ("cross",)
    n_heads = 1
    d_ff = None  # no position-wise feed-forward network
    positional_kind = None  # the RNN reads its input in order: no position table, no length limit
    max_positions = None

    def __init__(self, *, encoder: RNNEncoder, decoder: LuongDecoder | BahdanauDecoder, pad_id: int):
        super().__init__()
        self.encoder, self.decoder, self.pad_id = encoder, decoder, pad_id
        d_model = self.d_model = decoder.d_model
        self.bridge_h = nn.Linear(d_model, d_model)  # encoder final state -> decoder initial state
        self.bridge_c = nn.Linear(d_model, d_model)

    @property
    def n_encoder_layers(self) -> int:
        return self.encoder.n_layers

    @property
    def n_decoder_layers(self) -> int:
        return self.decoder.rnn.num_layers

    def attention_shape(self, kind: str) -> tuple[int, int]:
        """(layers, heads) of the maps of one of attention_kinds: one map, L = H = 1."""
        return 1, 1

    def encode(self, src, return_attention=False):
        """src (B, S) -> (memory = (outputs (B, S, D), hidden (L, B, D), cell | None), {} or None).
        RNN encoders have no self-attention: with return_attention, an empty dict of maps."""
        return self.encoder(src), ({} if return_attention else None)

    def _bridge(self, final, linear):
        # encoder final states (L_enc, B, D) -> decoder initial states (L_dec, B, D): layer by layer from
        # the top; when the decoder is deeper, its extra layers start from the encoder's top layer too
        n_dec = self.decoder.rnn.num_layers
        top = final[-n_dec:] if final.size(0) >= n_dec else final[-1:].expand(n_dec, -1, -1)
        return torch.tanh(linear(top)).contiguous()

    def init_state(self, memory, src) -> RNNState:
        outputs, hidden, cell = memory
        hidden = self._bridge(hidden, self.bridge_h)
        if isinstance(self.decoder.rnn, nn.LSTM):
            cell = self._bridge(cell, self.bridge_c) if cell is not None else torch.zeros_like(hidden)
        return RNNState(hidden=hidden, cell=cell if isinstance(self.decoder.rnn, nn.LSTM) else None,
                        input_feed=outputs.new_zeros(outputs.size(0), outputs.size(2)), memory=outputs,
                        prepared_keys=self.decoder.score.prepare_keys(outputs), src_mask=src != self.pad_id)

    def decode_step(self, tokens, state: RNNState, return_attention=False):
        """tokens (R,) -> (log_probs (R, V), state, {"cross": (R, 1, 1, 1, S)} or None)."""
        out, alpha = self.decoder.step(tokens, state)
        state.step += 1
        log_probs = torch.log_softmax(self.decoder.generator(out).float(), dim=-1)
        return log_probs, state, ({"cross": alpha[:, None, None, None, :]} if return_attention else None)

    def _teacher_forced(self, src, tgt_in):
        """One decoder step per target position: (B, S), (B, T) -> (hidden (B, T, D), alphas (B, T, S))."""
        state = self.init_state(self.encode(src)[0], src)
        outputs, alphas = [], []
        for t in range(tgt_in.size(1)):
            out, alpha = self.decoder.step(tgt_in[:, t], state)
            outputs.append(out)
            alphas.append(alpha)
        return torch.stack(outputs, dim=1), torch.stack(alphas, dim=1)

    @property
    def generator(self) -> nn.Linear:
        """The output layer (attentional vector -> logits), named as in the Transformer."""
        return self.decoder.generator

    def decoder_output(self, src, tgt_in):
        """Teacher forcing up to the output layer: (B, S), (B, T) -> (B, T, D), the generator's input."""
        return self._teacher_forced(src, tgt_in)[0]

    def forward(self, src, tgt_in, return_attention=False):
        """Teacher forcing: (B, S), (B, T) -> logits (B, T, V) [, {"cross": (B, 1, 1, T, S)}]."""
        hidden, alphas = self._teacher_forced(src, tgt_in)
        logits = self.decoder.generator(hidden)
        if return_attention:
            return logits, {"cross": alphas[:, None, None]}
        return logits
