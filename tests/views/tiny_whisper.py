"""A CTranslate2 Whisper model made here, small and of random weights: no model hub is reachable and no
Whisper model ships in a package, so the whisper engine's real loading and transcribing code runs on this one.
It hears nothing true (its words are noise), but it is a whole model directory as
``ct2-transformers-converter`` writes one (``model.bin``, ``config.json``, ``vocabulary.json``, and
``tokenizer.json`` beside them), with the special and timestamp tokens faster-whisper looks for."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

WIDTH, FFN, MELS = 16, 32, 80
SPECIALS = [
    "<|endoftext|>",
    "<|startoftranscript|>",
    "<|en|>",
    "<|translate|>",
    "<|transcribe|>",
    "<|startoflm|>",
    "<|startofprev|>",
    "<|nocaptions|>",
    "<|notimestamps|>",
]


def make_model(directory: Path) -> Path:
    """A one-layer Whisper model of width 16 over a vocabulary of letters, saved in ``directory``."""
    import ctranslate2.specs as specs
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    rng = np.random.default_rng(0)
    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)]
    stamps = [f"<|{i * 0.02:.2f}|>" for i in range(1501)]
    vocabulary = [*letters, *("Ġ" + letter for letter in letters), *SPECIALS, *stamps]

    def weights(*shape: int) -> Any:
        return (rng.standard_normal(shape) * 0.1).astype(np.float32)

    def norm(layer: Any) -> None:
        layer.gamma, layer.beta = np.ones(WIDTH, np.float32), weights(WIDTH)

    def linear(layer: Any, out: int, into: int) -> None:
        layer.weight, layer.bias = weights(out, into), weights(out)

    def attention_and_ffn(layer: Any) -> None:
        norm(layer.self_attention.layer_norm)
        linear(layer.self_attention.linear[0], 3 * WIDTH, WIDTH)
        linear(layer.self_attention.linear[1], WIDTH, WIDTH)
        norm(layer.ffn.layer_norm)
        linear(layer.ffn.linear_0, FFN, WIDTH)
        linear(layer.ffn.linear_1, WIDTH, FFN)

    spec = specs.WhisperSpec(1, 2, 1, 2)
    encoder, decoder = spec.encoder, spec.decoder
    encoder.conv1.weight, encoder.conv1.bias = weights(WIDTH, MELS, 3), weights(WIDTH)
    encoder.conv2.weight, encoder.conv2.bias = weights(WIDTH, WIDTH, 3), weights(WIDTH)
    encoder.position_encodings.encodings = weights(1500, WIDTH)
    norm(encoder.layer_norm)
    for layer in encoder.layer:
        attention_and_ffn(layer)
    decoder.embeddings.weight = weights(len(vocabulary), WIDTH)
    decoder.position_encodings.encodings = weights(448, WIDTH)
    norm(decoder.layer_norm)
    decoder.projection.weight = weights(len(vocabulary), WIDTH)
    for layer in decoder.layer:
        attention_and_ffn(layer)
        norm(layer.attention.layer_norm)
        linear(layer.attention.linear[0], WIDTH, WIDTH)
        linear(layer.attention.linear[1], 2 * WIDTH, WIDTH)
        linear(layer.attention.linear[2], WIDTH, WIDTH)
    spec.register_vocabulary(vocabulary)
    spec.config.suppress_ids = []
    spec.config.suppress_ids_begin = []
    spec.config.lang_ids = [vocabulary.index("<|en|>")]
    spec.config.alignment_heads = [(0, 0), (0, 1)]
    spec.validate()
    spec.save(str(directory))
    tokenizer = Tokenizer(
        models.WordLevel({token: i for i, token in enumerate(vocabulary)}, unk_token="<|endoftext|>")
    )
    tokenizer.add_special_tokens([*SPECIALS, *stamps])
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.save(str(directory / "tokenizer.json"))
    return directory
